//! `[cluster]` validation: defaults, every key, and each bad value at its file:line:col.

use std::path::Path;
use std::time::Duration;

use super::*;
use crate::config::Config;

fn load(cluster: &str) -> Result<Option<ClusterSettings>, String> {
    let text = format!("[cluster]\n{cluster}\n");
    Config::from_text(Path::new("/etc/hb/config.toml"), &text)
        .map(|l| l.config.cluster)
        .map_err(|e| e.problems.join("\n"))
}

#[test]
fn no_section_means_no_cluster_and_defaults_fill_the_rest() {
    let alone = Config::from_text(Path::new("/etc/hb/config.toml"), "").expect("valid");
    assert!(alone.config.cluster.is_none());
    let settings = load("endpoints = [\"http://127.0.0.1:2379\"]")
        .expect("valid")
        .expect("a cluster");
    assert_eq!(settings.endpoints[0].as_str(), "http://127.0.0.1:2379/");
    assert_eq!(settings.name, DEFAULT_NAME);
    assert_eq!(settings.node, crate::host::name());
    assert_eq!(settings.lease, DEFAULT_LEASE);
    assert_eq!(settings.on_unavailable, OnUnavailable::Skip);
    assert!(settings.user.is_none() && settings.password.is_none());
}

#[test]
fn every_key_is_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let password = dir.path().join("pw");
    std::fs::write(&password, "s3cret-pw\n").expect("write");
    let pem = dir.path().join("ca.pem");
    std::fs::write(&pem, "").expect("write");
    let text = format!(
        "endpoints = [\"https://10.0.0.1:2379\", \"https://10.0.0.2:2379\"]\nname = \"prod/eu\"\n\
         node = \"a\"\nlease = \"4s\"\nca_file = \"{pem}\"\ncert_file = \"{pem}\"\n\
         key_file = \"{pem}\"\nuser = \"agent\"\npassword_file = \"{pw}\"\non_unavailable = \"run\"",
        pem = pem.display(),
        pw = password.display()
    );
    let s = load(&text).expect("valid").expect("a cluster");
    assert_eq!(s.endpoints.len(), 2);
    assert_eq!((s.name.as_str(), s.node.as_str()), ("prod/eu", "a"));
    assert_eq!(s.lease, Duration::from_secs(4));
    assert_eq!(s.ca_file.as_deref(), Some(pem.as_path()));
    assert_eq!(s.user.as_deref(), Some("agent"));
    assert_eq!(s.password.as_ref().map(Secret::expose), Some("s3cret-pw"));
    assert!(!format!("{s:?}").contains("s3cret-pw"));
    assert_eq!(s.on_unavailable, OnUnavailable::Run);
}

#[test]
fn bad_values_point_at_the_line() {
    let url = "endpoints = [\"http://127.0.0.1:2379\"]";
    let cases = [
        ("name = \"x\"".to_owned(), "config.toml:1:1: [cluster]: key `endpoints`: `endpoints` is required"),
        ("endpoints = []".to_owned(), "config.toml:2:13: [cluster]: key `endpoints`: must list at least one URL"),
        ("endpoints = [\"127.0.0.1:2379\"]".to_owned(), "config.toml:2:14: [cluster]: key `endpoints`: \"127.0.0.1:2379\" lacks its scheme: write \"http://127.0.0.1:2379\""),
        ("endpoints = [\"ftp://h:2379\"]".to_owned(), "key `endpoints`: \"ftp://h:2379\" has scheme \"ftp\"; expected http or https"),
        ("endpoints = [\"http://u:pw@h:2379\"]".to_owned(), "key `endpoints`: an endpoint URL must not hold a user or password"),
        ("endpoints = [\"http://h:2379/v3\"]".to_owned(), "key `endpoints`: \"http://h:2379/v3\" has a path"),
        (format!("{url}\nlease = \"1s\""), "config.toml:3:9: [cluster]: key `lease`: 1s is out of range: a lease is from 2s to 60s"),
        (format!("{url}\nlease = \"61s\""), "key `lease`: 61s is out of range"),
        (format!("{url}\nlease = \"2500ms\""), "key `lease`: 2.5s is not whole seconds"),
        (format!("{url}\nnode = \"a/b\""), "config.toml:3:8: [cluster]: key `node`: \"a/b\" is not printable ASCII without spaces or `/`"),
        (format!("{url}\nname = \"/x\""), "key `name`: \"/x\" is not printable ASCII"),
        (format!("{url}\non_unavailable = \"retry\""), "config.toml:3:18: [cluster]: key `on_unavailable`: \"retry\" is neither \"skip\" nor \"run\""),
        (format!("{url}\ncert_file = \"/etc/hostname\""), "key `cert_file`: a client certificate needs both `cert_file` and `key_file`"),
        (format!("{url}\nca_file = \"/nonexistent/ca.pem\""), "key `ca_file`: cannot read /nonexistent/ca.pem"),
        (format!("{url}\nca_file = \"/dev/null\""), "key `ca_file`: cannot read /dev/null: it is a device, not a regular file"),
        (format!("{url}\nuser = \"agent\""), "config.toml:3:8: [cluster]: key `user`: `user` is set but no password"),
        (format!("{url}\nuser = \"agent\"\npassword_file = \"/nonexistent/pw\""), "key `password_file`: cannot use the password file /nonexistent/pw"),
        (format!("{url}\nuser = \"agent\"\npassword_env = \"HB_TEST_UNSET_PASSWORD_VAR\""), "key `password_env`: `password_env` names $HB_TEST_UNSET_PASSWORD_VAR, which is not set (or empty); hint: set it in the agent's environment"),
        (format!("{url}\npassword_env = \"PATH\""), "key `password_env`: a password is set but no `user`"),
        (format!("{url}\npassword_file = \"a\"\npassword_env = \"B\""), "key `password_env`: set either `password_file` or `password_env`, not both"),
        (format!("{url}\nendpoint = \"x\""), "config.toml:3:1: [cluster]: key `endpoint`: unknown key"),
    ];
    for (text, expected) in cases {
        let err = load(&text).expect_err(&text);
        assert!(err.contains(expected), "{text}\n---\n{err}");
    }
}

#[test]
fn run_on_defaults_to_one_for_commands_and_all_for_watches() {
    let jobs = "[defaults]\nrun_on = \"all\"\n\n[[jobs]]\nname = \"c\"\nschedule = \"@daily\"\n\
                command = [\"true\"]\nrun_on = \"one\"\n\n[[jobs]]\nname = \"d\"\n\
                schedule = \"@daily\"\nshell = \"true\"\n";
    let run_on = |text: &str| -> Vec<crate::config::RunOn> {
        let config = Config::from_text(Path::new("/etc/hb/config.toml"), text)
            .expect("valid")
            .config;
        config.jobs.iter().map(|j| j.run_on).collect()
    };
    let one_all = [crate::config::RunOn::One, crate::config::RunOn::All];
    assert_eq!(run_on(jobs), one_all);
    let plain = "[[jobs]]\nname = \"c\"\nschedule = \"@daily\"\ncommand = [\"true\"]\n\n\
                 [[jobs]]\nname = \"w\"\nschedule = \"@daily\"\n[jobs.watch]\nkind = \"load\"\n\
                 max_load1 = 4.0\n";
    assert_eq!(run_on(plain), one_all);
    let bad =
        "[[jobs]]\nname = \"c\"\nschedule = \"@daily\"\ncommand = [\"true\"]\nrun_on = \"any\"\n";
    let err = Config::from_text(Path::new("/etc/hb/config.toml"), bad).expect_err("invalid");
    let text = err.problems.join("\n");
    assert!(
        text.contains("config.toml:5:10: job \"c\": key `run_on`: unknown run_on \"any\": expected \"one\" or \"all\""),
        "{text}"
    );
}
