//! Commands that read the config fail alike when it does not load (exit 78); a command that
//! sends no fail ping does not need the fail headers' variables; a script without `#!` runs
//! through `/bin/sh` whichever way the agent starts it.

use std::os::unix::fs::PermissionsExt;
use std::process::Output;

use crate::util::Home;

fn agent(home: &Home, args: &[&str]) -> Output {
    home.agent()
        .arg("--config")
        .arg(home.config_path())
        .args(args)
        .output()
        .expect("run the agent")
}

#[test]
fn history_fails_like_status_when_the_config_does_not_load() {
    let home = Home::new();
    home.write_config("[agent]\nstate_dir = 7\n\n[[jobs]]\nname = \"a\"\ncommand = [\"true\"]\n");
    for args in [&["history"][..], &["history", "a"], &["status"]] {
        let out = agent(&home, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(78), "{args:?}: {stderr}");
        assert!(stderr.contains("config.toml:2:13"), "{args:?}: {stderr}");
        assert!(!stderr.contains("no job named"), "{stderr}");
    }
}

#[test]
fn read_only_commands_do_not_need_the_fail_headers_variables() {
    let home = Home::new();
    let state = home.state_dir();
    home.write_config(&format!(
        "[agent]\nstate_dir = \"{}\"\n\n[status]\nlisten = \"{}\"\n\n\
         [[jobs]]\nname = \"a\"\nschedule = \"@daily\"\nping_url = \"http://127.0.0.1:9/p\"\n\
         fail_headers = {{ Authorization = {{ env = \"HB_UNSET_HOOK_TOKEN\" }} }}\n\
         command = [\"true\"]\n",
        state.display(),
        home.path("none.sock").display()
    ));
    // No daemon: status says so (1), history has nothing (0); neither is a config error.
    for (args, code) in [(&["history"][..], 0), (&["status"][..], 1)] {
        let out = agent(&home, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
        assert!(!stderr.contains("HB_UNSET_HOOK_TOKEN"), "{stderr}");
    }
    // What sends the fail ping still needs it, with the place and the fix.
    let out = agent(&home, &["config", "check"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{stderr}");
    assert!(
        stderr.contains("names $HB_UNSET_HOOK_TOKEN, which is not set"),
        "{stderr}"
    );
}

#[test]
fn a_script_without_a_shebang_runs_through_sh_on_every_spawn_path() {
    let home = Home::new();
    let bin = home.path("bin");
    std::fs::create_dir(&bin).expect("bin/");
    let script = bin.join("noshebang");
    std::fs::write(&script, "echo \"ran by sh with $# args: $1\"\nexit 4\n").expect("script");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    // By path (posix_spawn); by name with the job's own PATH (std's Command, which looks the
    // name up in the child's PATH).
    home.write_config(&format!(
        "[agent]\nstate_dir = \"{}\"\n\n\
         [[jobs]]\nname = \"by_path\"\nschedule = \"@daily\"\ncommand = [\"{}\", \"one\"]\n\n\
         [[jobs]]\nname = \"by_name\"\nschedule = \"@daily\"\ncommand = [\"noshebang\", \"one\"]\n\
         env = {{ PATH = \"{}:/usr/bin:/bin\" }}\n",
        home.state_dir().display(),
        script.display(),
        bin.display()
    ));
    for job in ["by_path", "by_name"] {
        let out = agent(&home, &["run", "--job", job]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(4), "{job}: {stdout} {stderr}");
        assert_eq!(stdout, "ran by sh with 1 args: one\n", "{job}: {stderr}");
    }
    // `run -- PROGRAM` directly, by path and by name in the agent's PATH.
    let path = format!("{}:/usr/bin:/bin", bin.display());
    for program in [script.to_str().expect("UTF-8"), "noshebang"] {
        let out = home
            .agent()
            .env("PATH", &path)
            .args(["run", "--", program, "one"])
            .output()
            .expect("run the agent");
        assert_eq!(out.status.code(), Some(4), "{program}: {out:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "ran by sh with 1 args: one\n"
        );
    }
}
