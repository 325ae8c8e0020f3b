//! Files another local user may control: a FIFO (or another non-regular file) or an oversized
//! file as the API key file or the status `token_file` is refused with a clear message, never
//! opened blocking; a symlinked state directory owned by someone else is refused, not followed.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

use crate::util::Home;

/// `heartbeat-agent ARGS --config CONFIG` in `home`, killed (and the test failed) after 20 s:
/// a FIFO opened blocking would hang it forever.
fn agent(home: &Home, args: &[&str]) -> Output {
    let child = home
        .agent()
        .args(args)
        .arg("--config")
        .arg(home.config_path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the agent");
    super::wait_bounded(child, Duration::from_secs(20))
}

fn mkfifo(path: &Path) {
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
}

#[test]
fn a_fifo_as_key_or_token_file_is_refused_by_config_check_and_the_daemon_without_hanging() {
    let home = Home::new();
    let key = home.path("key.fifo");
    let token = home.path("token.fifo");
    mkfifo(&key);
    mkfifo(&token);
    home.write_config(&format!(
        "[agent]\nstate_dir = \"{}\"\n\n[api]\napi_key_file = \"{}\"\n\n[status]\n\
         listen = \"127.0.0.1:0\"\ntoken_file = \"{}\"\n",
        home.state_dir().display(),
        key.display(),
        token.display()
    ));
    let path = home.config_path();
    let expected = [
        format!(
            "{}:5:16: [api]: key `api_key_file`: api key file {}: it is a FIFO, not a regular file",
            path.display(),
            key.display()
        ),
        format!(
            "{}:9:14: [status]: key `token_file`: cannot read the token file {}: it is a FIFO, \
             not a regular file; hint: write the token into it (one line), a regular file \
             readable by the agent",
            path.display(),
            token.display()
        ),
    ];
    for args in [&["config", "check"][..], &["daemon"][..]] {
        let out = agent(&home, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(78), "{args:?}: {stderr}");
        for line in &expected {
            assert!(
                stderr.lines().any(|l| l.starts_with(line.as_str())),
                "{args:?}: expected a line starting with\n{line}\ngot:\n{stderr}"
            );
        }
    }
    // Nothing was written into the FIFOs' place; they are still FIFOs.
    for fifo in [&key, &token] {
        let kind = std::fs::symlink_metadata(fifo)
            .expect("still there")
            .file_type();
        assert!(std::os::unix::fs::FileTypeExt::is_fifo(&kind));
    }
}

#[test]
fn a_token_file_over_the_size_limit_is_refused() {
    let home = Home::new();
    let token = home.path("token");
    std::fs::write(&token, "t".repeat(16 * 1024 + 1)).expect("write the token");
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    home.write_config(&format!(
        "[status]\nlisten = \"127.0.0.1:0\"\ntoken_file = \"{}\"\n",
        token.display()
    ));
    let out = agent(&home, &["config", "check"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "config.toml:3:14: [status]: key `token_file`: cannot read the token file {}: it is \
             16385 bytes, more than the 16384 a key or token file may hold",
            token.display()
        )),
        "{stderr}"
    );
}

/// The state directory is a link another user made (to a directory of theirs): the daemon
/// (running as root here) refuses to start and touches nothing there. Before, it created its
/// directories inside the link's target and chmodded them.
#[test]
fn a_symlinked_state_dir_owned_by_another_user_is_refused_not_followed() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("SKIPPED: needs root to give the link another owner (run the suite as root)");
        return;
    }
    let home = Home::new();
    let theirs = home.path("theirs");
    std::fs::create_dir(&theirs).expect("their directory");
    std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let nobody = nix::unistd::Uid::from_raw(65534);
    nix::unistd::chown(&theirs, Some(nobody), None).expect("chown their directory");
    let link = home.path("state");
    std::os::unix::fs::symlink(&theirs, &link).expect("symlink");
    nix::unistd::fchownat(
        None,
        &link,
        Some(nobody),
        None,
        nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
    )
    .expect("lchown the link");
    home.write_config(&format!(
        "[agent]\nstate_dir = \"{}\"\n\n[[jobs]]\nname = \"tick\"\nschedule = \"*/1 * * * * *\"\n\
         command = [\"true\"]\n",
        link.display()
    ));
    for args in [&["daemon"][..], &["sync"][..]] {
        let out = agent(&home, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "the state directory {} is a symbolic link owned by uid 65534, not by this user \
                 (uid 0) or root; it is not followed: replace it with a directory owned by uid 0",
                link.display()
            )),
            "{args:?}: {stderr}"
        );
    }
    // Their directory is as it was: empty, mode 0777, theirs.
    let meta = std::fs::metadata(&theirs).expect("their directory");
    assert_eq!(meta.mode() & 0o777, 0o777);
    assert_eq!(meta.uid(), 65534);
    assert_eq!(std::fs::read_dir(&theirs).expect("list").count(), 0);

    // A link root owns, to a directory of that other user: refused too.
    std::fs::remove_file(&link).expect("remove the link");
    std::os::unix::fs::symlink(&theirs, &link).expect("symlink");
    let out = agent(&home, &["daemon"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("is a symbolic link to a directory owned by uid 65534"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_dir(&theirs).expect("list").count(), 0);
}
