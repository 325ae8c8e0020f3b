//! Unit tests of loading: each kind of problem with its exact message and place.

use super::*;

fn problems(text: &str) -> Vec<String> {
    match Config::from_text(Path::new("c.toml"), text) {
        Ok(loaded) => panic!("expected problems, got {:?}", loaded.config),
        Err(err) => err.problems,
    }
}

fn load(text: &str) -> Loaded {
    match Config::from_text(Path::new("/etc/ha/c.toml"), text) {
        Ok(loaded) => loaded,
        Err(err) => panic!("expected a valid config: {err}"),
    }
}

/// A job with a name, a schedule and a check: add keys after it.
const JOB: &str = "[[jobs]]\nname = \"backup\"\nschedule = \"0 3 * * *\"\ncheck_id = \"c1\"\n";

#[test]
fn syntax_error_has_line_and_column() {
    assert_eq!(
        problems("[agent]\ntimezone = UTC\n"),
        [
            "c.toml:2:12: invalid TOML: invalid string, expected `\"`, `'`; hint: fix the TOML \
          syntax at this place (strings need quotes, tables [brackets])"
        ]
    );
    assert_eq!(
        problems("a = 1\na = 2\n"),
        [
            "c.toml:2:1: invalid TOML: duplicate key `a` in document root; hint: fix the TOML \
          syntax at this place (strings need quotes, tables [brackets])"
        ]
    );
}

#[test]
fn unknown_keys_suggest_the_closest() {
    let text = format!("[agent]\ntimezon = \"UTC\"\ncolour = 1\n{JOB}schedul = \"x\"\n");
    assert_eq!(
        problems(&text),
        [
            "c.toml:2:1: [agent]: key `timezon`: unknown key; hint: did you mean `timezone`?",
            "c.toml:3:1: [agent]: key `colour`: unknown key; hint: known keys here: state_dir, \
             timezone, shutdown_timeout, outbox_max_entries, outbox_max_age, resync_interval, \
             sync_jitter, reassert_interval, history, history_keep_removed",
            "c.toml:8:1: job \"backup\": key `schedul`: unknown key; hint: did you mean `schedule`?",
        ]
    );
    assert_eq!(
        problems("[job]\n"),
        ["c.toml:1:2: key `job`: unknown key; hint: did you mean `jobs`?"]
    );
}

#[test]
fn watch_keys_on_a_job_point_at_the_watch_table() {
    assert_eq!(
        problems(&format!("{JOB}max_age = \"1h\"\n")),
        [
            "c.toml:5:1: job \"backup\": key `max_age`: unknown key; hint: `max_age` belongs in \
          the job's [jobs.watch] table, next to `kind`"
        ]
    );
}

#[test]
fn wrong_types_say_what_was_expected_and_every_one_is_reported() {
    let text = format!("{JOB}timeout = true\nenabled = \"yes\"\ncommand = \"ls\"\n");
    assert_eq!(
        problems(&text),
        [
            "c.toml:5:11: job \"backup\": key `timeout`: invalid type: boolean `true`, expected \
             a duration string with a unit, such as \"30s\"; hint: for example: timeout = \"5m\"",
            "c.toml:6:11: job \"backup\": key `enabled`: invalid type: string \"yes\", expected a \
             boolean; hint: for example: enabled = false",
            "c.toml:7:11: job \"backup\": key `command`: invalid type: string \"ls\", expected an \
             array; hint: for example: command = [\"/usr/local/bin/backup\", \"--full\"]",
        ]
    );
}

#[test]
fn bare_number_duration_suggests_the_unit() {
    assert_eq!(
        problems("[agent]\nshutdown_timeout = 30\n"),
        [
            "c.toml:2:20: [agent]: key `shutdown_timeout`: duration \"30\" has no unit: write \
          \"30s\", \"30m\", \"30h\" or \"30d\"; hint: durations are quoted strings with a unit, \
          for example: shutdown_timeout = \"30s\""
        ]
    );
    assert_eq!(
        problems(&format!("{JOB}jitter = \"5 parsecs\"\n")),
        [
            "c.toml:5:10: job \"backup\": key `jitter`: invalid duration \"5 parsecs\": \"5\" has \
          no unit (ms, s, m, h or d); hint: use a number with a unit (ms, s, m, h or d), for \
          example: jitter = \"30s\""
        ]
    );
}

#[test]
fn unknown_timezone_suggests_a_name() {
    assert_eq!(
        problems(&format!("{JOB}timezone = \"Europe/Berln\"\n")),
        [
            "c.toml:5:12: job \"backup\": key `timezone`: unknown time zone \"Europe/Berln\"; \
          hint: did you mean \"Europe/Berlin\"?"
        ]
    );
}

#[test]
fn duplicate_names_name_both_lines() {
    let text = format!("{JOB}{JOB}");
    assert_eq!(
        problems(&text),
        [
            "c.toml:6:8: job \"backup\": key `name`: duplicate job name \"backup\": the first job \
          with this name is at line 2, this one at line 6; hint: job names must be unique; \
          rename one of them"
        ]
    );
}

#[test]
fn names_must_be_safe_for_file_names() {
    let text = "[[jobs]]\nname = \"../etc passwd\"\nschedule = \"@daily\"\n";
    assert_eq!(
        problems(text),
        [
            "c.toml:2:8: job \"../etc passwd\": key `name`: job name \"../etc passwd\" is not \
          allowed: names are 1 to 100 letters, digits, '.', '_' or '-', starting with a letter \
          or digit (they name state files); hint: for example: name = \"etc-passwd\""
        ]
    );
    assert_eq!(
        problems("[[jobs]]\nschedule = \"@daily\"\n"),
        [
            "c.toml:1:1: job #1: key `name`: missing required key; hint: add it, for example: \
          name = \"backup\""
        ]
    );
}

#[test]
fn command_and_shell_together_are_an_error() {
    let text = format!("{JOB}command = [\"a\"]\nshell = \"b\"\n");
    assert_eq!(
        problems(&text),
        [
            "c.toml:6:1: job \"backup\": key `shell`: a job does exactly one of `command`, \
          `shell` or `watch`, but this one has both `command` and `shell`; hint: keep one; a \
          job with none is external (run elsewhere, for example by cron through \
          `heartbeat-agent run --job NAME`)"
        ]
    );
    assert_eq!(
        problems(&format!("{JOB}command = []\n")),
        [
            "c.toml:5:11: job \"backup\": key `command`: the command is empty: expected the \
          program and its arguments; hint: for example: command = [\"/usr/local/bin/backup\", \
          \"--full\"]"
        ]
    );
}

#[test]
fn ping_url_and_check_id_together_are_an_error() {
    let text = "[[jobs]]\nname = \"a\"\nschedule = \"@daily\"\n\
                ping_url = \"https://p.example.com/tok-SECRET\"\ncheck_id = \"c1\"\n";
    assert_eq!(
        problems(text),
        [
            "c.toml:5:12: job \"a\": key `check_id`: set either `ping_url` or `check_id`, not \
          both; hint: keep `ping_url` for any heartbeat service, or `check_id` to ping the check \
          whose URL sync learns"
        ]
    );
}

#[test]
fn bad_ping_url_never_shows_the_url() {
    for (url, message) in [
        (
            "ftp://p.example.com/tok-SECRET",
            "URL has scheme \"ftp\"; expected http or https",
        ),
        (
            "p.example.com/tok-SECRET",
            "not a valid URL: relative URL without a base",
        ),
        (
            "http://p.example.com:99999/tok-SECRET",
            "not a valid URL: invalid port number",
        ),
    ] {
        let text = format!("[[jobs]]\nname = \"a\"\nschedule = \"@daily\"\nping_url = \"{url}\"\n");
        let got = problems(&text);
        assert_eq!(
            got,
            [format!(
                "c.toml:4:12: job \"a\": key `ping_url`: {message}; hint: write a full URL, for \
                 example: ping_url = \"https://ping.example.com/TOKEN\""
            )]
        );
    }
}

#[test]
fn values_are_range_checked() {
    let text = format!(
        "{JOB}success_exit_codes = [0, 256]\noverlap = \"sometimes\"\noutput_tail = \"10 KB\"\n\
         [jobs.watch]\nkind = \"memory\"\nmax_used_percent = 120\n"
    );
    assert_eq!(
        problems(&text),
        [
            "c.toml:5:26: job \"backup\": key `success_exit_codes`: exit code 256 is out of \
             range: exit codes are 0 to 255; hint: for example: success_exit_codes = [0, 3]",
            "c.toml:6:11: job \"backup\": key `overlap`: unknown overlap \"sometimes\": expected \
             \"skip\", \"queue\" or \"allow\"; hint: \"skip\" (default) skips a run while the \
             last one runs, \"queue\" runs it after, \"allow\" runs both",
            "c.toml:10:20: job \"backup\": key `watch.max_used_percent`: 120 is out of range: \
             expected 0 to 100; hint: for example: max_used_percent = 90",
        ]
    );
}

#[test]
fn watch_kinds_check_their_keys() {
    let text = format!("{JOB}[jobs.watch]\nkind = \"file\"\npattern = \"x\"\n");
    assert_eq!(
        problems(&text),
        [
            "c.toml:5:1: job \"backup\": key `watch.path`: missing required key; hint: add it, \
             for example: path = \"/var/backups/latest.tar\"",
            "c.toml:5:1: job \"backup\": key `watch.max_age`: missing required key; hint: add \
             it, for example: max_age = \"26h\"",
            "c.toml:7:1: job \"backup\": key `watch.pattern`: does not apply to a file watch; \
             hint: a file watch takes: path, max_age",
        ]
    );
    assert_eq!(
        problems(&format!("{JOB}[jobs.watch]\nkind = \"cpu\"\n")),
        [
            "c.toml:6:8: job \"backup\": key `watch.kind`: unknown watch kind \"cpu\"; hint: use \
          one of \"process\", \"file\", \"disk\", \"memory\", \"load\", \"tcp\", \"http\""
        ]
    );
    assert_eq!(
        problems(&format!(
            "{JOB}[jobs.watch]\nkind = \"tcp\"\naddress = \"db\"\nport = 1\n"
        )),
        [
            "c.toml:7:11: job \"backup\": key `watch.address`: \"db\" is not host:port; hint: \
             for example: address = \"127.0.0.1:5432\"",
            "c.toml:8:1: job \"backup\": key `watch.port`: unknown key; hint: known keys here: \
             kind, pattern, path, max_age, min_free, max_used_percent, max_load1, address, \
             timeout, url, expect_status",
        ]
    );
}

#[test]
fn api_key_sources_are_exclusive() {
    let text = "[api]\napi_key_file = \"/k\"\napi_key_env = \"KEY\"\n";
    assert_eq!(
        problems(text),
        [
            "c.toml:3:15: [api]: key `api_key_env`: set either `api_key_file` or `api_key_env`, \
          not both; hint: keep one of them; without either the systemd credential `api-key` or \
          $HEARTBEAT_AGENT_API_KEY is used"
        ]
    );
}

#[test]
fn every_problem_of_every_job_is_collected() {
    let text = "[[jobs]]\nname = \"a\"\nschedule = \"@daily\"\ntimeout = 5\n\
                [[jobs]]\nname = \"b\"\nschedule = \"@daily\"\ntimezone = \"Mars/Base\"\n\
                [[jobs]]\nname = \"c\"\nschedule = \"@daily\"\nkind = \"file\"\n";
    let got = problems(text);
    assert_eq!(got.len(), 3, "{got:#?}");
    assert!(got[0].starts_with("c.toml:4:11: job \"a\": key `timeout`"));
    assert!(got[1].starts_with("c.toml:8:12: job \"b\": key `timezone`"));
    assert!(got[2].starts_with("c.toml:12:1: job \"c\": key `kind`: unknown key"));
}

#[test]
fn a_jobs_table_instead_of_an_array_is_explained() {
    assert_eq!(
        problems("[jobs]\nname = \"a\"\n"),
        [
            "c.toml:1:1: key `jobs`: expected an array of job tables; hint: start each job with \
          [[jobs]] (two brackets)"
        ]
    );
}

#[test]
fn defaults_apply_and_jobs_override() {
    let loaded = load(
        "[agent]\ntimezone = \"Europe/Berlin\"\nstate_dir = \"state\"\n\
         [defaults]\ntimeout = \"5m\"\nsuccess_exit_codes = [0, 3]\nenv = { A = \"1\", B = \"2\" }\n\
         shell_program = \"/bin/bash\"\n\
         [[jobs]]\nname = \"a\"\nschedule = \"@daily\"\nshell = \"echo hi\"\ncheck_id = \"c1\"\n\
         timeout = \"1h\"\noutput_tail = 2048\n[jobs.env]\nB = \"3\"\n\
         [[jobs]]\nname = \"b\"\nschedule = \"@daily\"\ntimezone = \"UTC\"\n\
         ping_url = \"https://p.example.com/tok\"\nwatch = { kind = \"disk\", path = \"/\", min_free = \"15%\" }\n",
    );
    let config = &loaded.config;
    assert_eq!(config.agent.state_dir, Some(PathBuf::from("/etc/ha/state")));
    assert_eq!(config.agent.shutdown_timeout, Duration::from_secs(30));
    let a = config.job("a").unwrap();
    assert_eq!(
        a.timezone,
        Zone::named("Europe/Berlin").expect("a known zone")
    );
    assert_eq!(a.timeout, Some(Duration::from_secs(3600)));
    assert_eq!(a.success_exit_codes, [0, 3]);
    assert_eq!(a.env.get("A").map(String::as_str), Some("1"));
    assert_eq!(a.env.get("B").map(String::as_str), Some("3"));
    assert_eq!(a.output_tail, 2048);
    assert_eq!(
        a.action,
        JobAction::Shell {
            program: PathBuf::from("/bin/bash"),
            script: "echo hi".to_owned()
        }
    );
    assert_eq!(a.target, PingTarget::Check("c1".to_owned()));
    let b = config.job("b").unwrap();
    assert_eq!(b.timezone, Zone::UTC);
    assert_eq!(b.timeout, Some(Duration::from_secs(300)));
    assert_eq!(b.kill_after, Duration::from_secs(10));
    assert_eq!(b.output_tail, 10 * 1024);
    assert_eq!(b.overlap, Overlap::Skip);
    assert!(b.enabled && !b.catch_up);
    assert_eq!(
        b.action,
        JobAction::Watch(WatchSpec::Disk {
            path: PathBuf::from("/"),
            min_free: Amount::Percent(15.0)
        })
    );
    assert_eq!(
        b.target,
        PingTarget::Url(PingUrl::parse("https://p.example.com/tok").expect("valid"))
    );
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
}

#[test]
fn watch_defaults_fill_in() {
    let loaded = load(
        "[[jobs]]\nname = \"t\"\nschedule = \"* * * * *\"\ncheck_id = \"c\"\n\
         [jobs.watch]\nkind = \"http\"\nurl = \"http://127.0.0.1:1/health\"\n",
    );
    assert_eq!(
        loaded.config.jobs[0].action,
        JobAction::Watch(WatchSpec::Http {
            url: "http://127.0.0.1:1/health".to_owned(),
            expect_status: 200,
            timeout: Duration::from_secs(10),
        })
    );
}

#[test]
fn a_job_without_target_is_valid_with_a_warning() {
    let loaded = load("[[jobs]]\nname = \"ext\"\nschedule = \"@daily\"\n");
    assert_eq!(loaded.config.jobs[0].action, JobAction::External);
    assert_eq!(loaded.config.jobs[0].target, PingTarget::None);
    assert_eq!(
        loaded.warnings,
        ["/etc/ha/c.toml:1:1: job \"ext\": no `ping_url` or `check_id`: nothing will be pinged; \
          hint: add `ping_url` or `check_id` to monitor this job"]
    );
}

#[test]
fn user_and_group_warn_unless_root() {
    let text = format!("{JOB}user = \"backup\"\n");
    let (raw, problems) = parse::parse(&text);
    assert!(problems.is_empty());
    let path = Path::new("c.toml");
    let lines = problem::Lines::new(&text);
    let (config, check) = validate::build(raw.unwrap(), path, &lines, false, true);
    assert!(config.is_some());
    let warnings: Vec<String> = check
        .warnings
        .iter()
        .map(|w| w.render(path, &lines))
        .collect();
    assert_eq!(
        warnings,
        [
            "c.toml:5:8: job \"backup\": key `user`: `user` only takes effect when the agent runs \
          as root; jobs run as the current user; hint: run the daemon as root, or remove it"
        ]
    );
    let (raw, _) = parse::parse(&text);
    let (_, check) = validate::build(raw.unwrap(), path, &lines, true, true);
    assert!(check.warnings.is_empty());
}

#[test]
fn key_file_permissions_warn_without_the_key() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key");
    std::fs::write(&key, "sk_live_TOPSECRET").unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let text = format!("[api]\napi_key_file = \"{}\"\n", key.display());
    let loaded = load(&text);
    assert_eq!(loaded.config.api.api_key, ApiKeySource::File(key.clone()));
    assert_eq!(
        loaded.warnings,
        [format!(
            "/etc/ha/c.toml:2:16: [api]: key `api_key_file`: api key file {} is readable by \
             group/others; chmod 600 it",
            key.display()
        )]
    );
    assert!(!loaded.warnings[0].contains("TOPSECRET"));
}

#[test]
fn missing_and_unreadable_files_name_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none.toml");
    let err = Config::load(&missing).unwrap_err();
    assert_eq!(
        err.problems,
        [format!(
            "{}: configuration file not found; create it (see config/example.toml and \
             docs/config.md), or name another with --config FILE or $HEARTBEAT_AGENT_CONFIG",
            missing.display()
        )]
    );
    let err = Config::load(dir.path()).unwrap_err();
    assert!(
        err.problems[0].starts_with(&format!(
            "{}: cannot read the configuration file: it is a directory, not a regular file",
            dir.path().display()
        )),
        "{err}"
    );
}

#[test]
fn a_watch_that_is_not_a_table_is_one_problem() {
    assert_eq!(
        problems(&format!("{JOB}watch = 5\n")),
        [
            "c.toml:5:9: job \"backup\": key `watch`: expected a table; hint: write it as a \
          [jobs.watch] table with its keys under it"
        ]
    );
    assert_eq!(
        problems(&format!(
            "{JOB}[jobs.watch]\nkind = \"load\"\nmax_load1 = \"high\"\n"
        )),
        [
            "c.toml:7:13: job \"backup\": key `watch.max_load1`: invalid type: string \"high\", \
          expected a number; hint: for example: max_load1 = 8.0"
        ]
    );
}

#[test]
fn a_misspelt_required_key_is_reported_once() {
    assert_eq!(
        problems("[[jobs]]\nnmae = \"a\"\nschedule = \"@daily\"\n"),
        ["c.toml:2:1: job #1: key `nmae`: unknown key; hint: did you mean `name`?"]
    );
    assert_eq!(
        problems(&format!(
            "{JOB}[jobs.watch]\nkind = \"file\"\npath = \"/x\"\nmax_aeg = \"1h\"\n"
        )),
        [
            "c.toml:8:1: job \"backup\": key `watch.max_aeg`: unknown key; hint: did you mean \
          `max_age`?"
        ]
    );
}

#[test]
fn outbox_limits_have_defaults_and_are_checked() {
    let config = load(JOB).config;
    assert_eq!(config.agent.outbox_max_entries, 1000);
    assert_eq!(config.agent.outbox_max_age, None);
    let config = load(&format!(
        "[agent]\noutbox_max_entries = 5\noutbox_max_age = \"10m\"\n{JOB}"
    ))
    .config;
    assert_eq!(config.agent.outbox_max_entries, 5);
    assert_eq!(config.agent.outbox_max_age, Some(Duration::from_secs(600)));
    assert_eq!(
        problems("[agent]\noutbox_max_entries = 0\noutbox_max_age = \"0s\"\n"),
        [
            "c.toml:2:22: [agent]: key `outbox_max_entries`: 0 is not a positive number of \
             entries; hint: for example: outbox_max_entries = 1000",
            "c.toml:3:18: [agent]: key `outbox_max_age`: must be longer than 0s: every pending \
             success would be dropped; hint: leave it out to use the job's period, for example: \
             outbox_max_age = \"1h\"",
        ]
    );
    assert_eq!(
        problems("[agent]\noutbox_max_entries = \"many\"\n").len(),
        1,
        "a string is a type error"
    );
}

#[test]
fn api_key_file_missing_or_a_directory_is_an_error_not_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let text = format!("[api]\napi_key_file = \"{}\"\n", missing.display());
    assert_eq!(
        problems(&text),
        [format!(
            "c.toml:2:16: [api]: key `api_key_file`: api key file {} cannot be read: No such file \
             or directory (os error 2); hint: write the API key into a file only its owner can \
             read (chmod 600) and name that file",
            missing.display()
        )]
    );
    let text = format!("[api]\napi_key_file = \"{}\"\n", dir.path().display());
    let found = problems(&text);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains(&format!(
            "api key file {} is a directory, not a file",
            dir.path().display()
        )),
        "{found:?}"
    );
}

/// Jobs that leave `[jobs.check]` and the start and fail pings at their defaults share one copy
/// of each (a daemon with thousands of jobs keeps one); a job that sets them has its own, with
/// what it set, and a created check's scope tag is that job's alone.
#[test]
fn default_check_settings_and_pings_are_shared_and_set_ones_are_each_jobs_own() {
    let text = "[[jobs]]\nname = \"a\"\nschedule = \"0 3 * * *\"\ncheck_id = \"c1\"\n\
                [[jobs]]\nname = \"b\"\nschedule = \"0 4 * * *\"\ncheck_id = \"c2\"\n\
                [[jobs]]\nname = \"c\"\nschedule = \"0 5 * * *\"\ncheck_id = \"c3\"\n\
                start_url = \"https://hc.example.com/start\"\n\
                [jobs.check]\nmuted = true\n";
    let jobs = load(text).config.jobs;
    let (a, b, c) = (&jobs[0], &jobs[1], &jobs[2]);
    assert!(Arc::ptr_eq(&a.check, &b.check));
    assert!(Arc::ptr_eq(&a.start_fail, &b.start_fail));
    assert_eq!(*a.check, CheckSettings::default());
    assert!(!Arc::ptr_eq(&a.check, &c.check));
    assert_eq!(c.check.muted, Some(true));
    assert!(!Arc::ptr_eq(&a.start_fail, &c.start_fail));
    assert!(c.start_fail.start_url.is_some());
    assert!(a.start_fail.start_url.is_none());
}
