//! `[cluster] password_env` against a real etcd with authentication: the daemon authenticates
//! with the password the variable held when it started; a reload (SIGHUP) of the same config
//! keeps it authenticated; a reload naming a variable the daemon was not started with is
//! refused, naming it, and the daemon goes on with the password it has; the environment of a
//! running process cannot change, so a new password takes a restart with the new value (etcd
//! refuses the old one as soon as it is changed there). The password appears nowhere: not in
//! the log, `/status` or the metrics.

use std::path::Path;
use std::time::Duration;

use nix::sys::signal::Signal;

use super::agents::{out_dir, Agent, JobShape, Setup};
use crate::util::emulator::Background;
use crate::util::etcd::EtcdCluster;

const PASSWORD: &str = "pw-env-reload-5150-first";
const NEW_PASSWORD: &str = "pw-env-reload-5150-second";

/// How many fires the agent has claimed and run so far.
fn fires(out: &Path) -> usize {
    std::fs::read_to_string(out.join("j0")).map_or(0, |t| t.lines().count())
}

/// Waits until the agent has run three more fires than `from` (each one claimed in etcd, so
/// authenticated).
fn runs_on(agent: &Agent, out: &Path, what: &str) {
    let from = fires(out);
    let ran = crate::util::wait_until(Duration::from_secs(15), Duration::from_millis(100), || {
        fires(out) >= from + 3
    });
    assert!(ran, "{what}: no fires claimed:\n{}", agent.messages());
}

/// Waits until the agent's log holds `n` lines saying `message`.
fn logged(agent: &Agent, message: &str, n: usize) {
    let seen = crate::util::wait_until(Duration::from_secs(15), Duration::from_millis(100), || {
        agent.messages().matches(message).count() >= n
    });
    assert!(seen, "{n} x {message:?} in the log:\n{}", agent.messages());
}

#[test]
fn the_etcd_password_from_password_env_holds_across_reloads_and_a_new_one_takes_a_restart() {
    let Some(cluster) = EtcdCluster::start(1) else {
        return;
    };
    cluster.enable_auth("agent", PASSWORD, "pwenv/");
    let emulator = Background::start();
    let (_dir, out) = out_dir();
    let setup = Setup {
        cluster: format!(
            "{}\nname = \"pwenv\"\nuser = \"agent\"\npassword_env = \"HB_ETCD_PW\"",
            cluster.endpoints_toml()
        ),
        jobs: 1,
        shape: JobShape::EVERY_SECOND,
        out: &out,
        emulator: &emulator,
    };
    let env = |password: &str| vec![("HB_ETCD_PW".to_owned(), password.to_owned())];
    let mut agent = Agent::start(&setup, "a", &env(PASSWORD)).terminate_on_drop();
    runs_on(&agent, &out, "started with the password from $HB_ETCD_PW");

    // The same config again: still authenticated.
    agent.signal(Signal::SIGHUP);
    logged(&agent, "configuration reloaded", 1);
    runs_on(&agent, &out, "after a reload of the same config");

    // A variable the daemon was not started with: the reload is refused, naming it; the daemon
    // goes on with the password it has.
    let config = std::fs::read_to_string(agent.home.config_path()).expect("the config");
    let renamed = config.replace("\"HB_ETCD_PW\"", "\"HB_ETCD_PW_NEW\"");
    agent.home.write_config(&renamed);
    agent.signal(Signal::SIGHUP);
    let refused =
        crate::util::wait_until(Duration::from_secs(15), Duration::from_millis(100), || {
            agent.status()["config"]["last_reload_error"]["problems"]
                .to_string()
                .contains("$HB_ETCD_PW_NEW, which is not set")
        });
    assert!(refused, "{}", agent.status()["config"]);
    runs_on(&agent, &out, "after a refused reload");
    agent.home.write_config(&config);
    agent.signal(Signal::SIGHUP);
    logged(&agent, "configuration reloaded", 2);
    assert!(agent.status()["config"]["last_reload_error"].is_null());

    // A new password in etcd: the running daemon's (its environment's) is refused...
    cluster.change_password("agent", NEW_PASSWORD);
    logged(&agent, "refused the credentials of user \"agent\"", 1);
    // ... and a reload cannot take the new value from the shell that sends SIGHUP; a restart
    // with it can.
    agent.terminate();
    agent.spawn(&env(NEW_PASSWORD));
    runs_on(&agent, &out, "restarted with the new password");

    let status = agent.status().to_string();
    let metrics = agent.metrics();
    for password in [PASSWORD, NEW_PASSWORD] {
        for (place, text) in [
            ("log", agent.log()),
            ("/status", status.clone()),
            ("metrics", metrics.clone()),
        ] {
            assert!(!text.contains(password), "the password is in the {place}");
        }
    }
}
