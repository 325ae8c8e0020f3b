//! `history` of a job nobody knows: exit 1, naming the job and the place searched as an
//! absolute path, even for a relative `--state-dir` (the reader of the message may be anywhere);
//! and the help of the commands around it names its defaults.

use crate::util::Home;

#[test]
fn an_unknown_job_names_the_absolute_place_searched() {
    let home = Home::new();
    let out = home
        .agent()
        .current_dir(home.root())
        .args(["--state-dir", "relative-state", "history", "nosuch"])
        .env("NO_COLOR", "1")
        .output()
        .expect("run the agent");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let place = home.root().join("relative-state/history");
    assert!(
        err.contains(&format!(
            "no job named \"nosuch\" in the config and no history of it in {}",
            place.display()
        )),
        "{err}"
    );
}

#[test]
fn help_names_the_config_default_and_the_emulator_key_default() {
    let home = Home::new();
    let help = |args: &[&str]| {
        let out = home.agent().args(args).output().expect("help");
        assert_eq!(out.status.code(), Some(0));
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    let text = help(&["history", "--help"]);
    assert!(
        text.contains("$HEARTBEAT_AGENT_CONFIG, else $CONFIGURATION_DIRECTORY/config.toml (set by systemd), else /etc/heartbeat-agent/config.toml for root"),
        "{text}"
    );
    let text = help(&["emulator", "--help"]);
    assert!(text.contains("[default: emulator-api-key]"), "{text}");
    for command in ["trigger", "pause", "resume"] {
        let text = help(&[command, "--help"]);
        assert!(text.contains("--token-file <FILE>"), "{command}: {text}");
    }
}
