//! Unit tests of the whole import: settings in effect per line, problems, and that the output
//! loads as configuration.

use std::path::Path;

use super::*;
use crate::config::Config;

fn run(text: &str, options: &Options) -> Import {
    import(text, "crontab", options)
}

/// The imported tables after a minimal config must load; returns the jobs.
fn load(jobs: &str) -> Vec<std::sync::Arc<crate::config::Job>> {
    let text = format!("[agent]\ntimezone = \"UTC\"\n\n{jobs}");
    match Config::from_text(Path::new("test.toml"), &text) {
        Ok(loaded) => loaded.config.jobs,
        Err(err) => panic!("{err}\n--- config ---\n{text}"),
    }
}

#[test]
fn settings_apply_to_the_lines_after_them() {
    let text = "0 1 * * * first\nSHELL=/bin/bash\nCRON_TZ=Europe/Berlin\nA = \"x y\"\n\
                RANDOM_DELAY=5\n0 2 * * * second\n";
    let out = run(text, &Options::default());
    assert!(out.problems.is_empty(), "{:?}", out.problems);
    let jobs = load(&out.jobs);
    assert_eq!(jobs.len(), 2);
    assert_eq!(jobs[0].timezone, Zone::UTC);
    assert!(jobs[0].env.is_empty());
    assert_eq!(
        jobs[1].timezone,
        Zone::named("Europe/Berlin").expect("a known zone")
    );
    assert_eq!(jobs[1].env.get("A").map(String::as_str), Some("x y"));
    assert_eq!(jobs[1].jitter, std::time::Duration::from_secs(300));
    assert_eq!(
        jobs[1].action,
        crate::config::JobAction::Shell {
            program: "/bin/bash".into(),
            script: "second".into()
        }
    );
}

#[test]
fn problems_name_the_line_and_the_jobs_under_a_bad_zone_are_kept_out() {
    let text =
        "MAILTO=ops@example.com\nCRON_TZ=Mars/Base\n0 1 * * * a\nCRON_TZ=UTC\n0 61 * * * b\n\
                0 1 * * * c\n";
    let out = run(text, &Options::default());
    let lines: Vec<usize> = out.problems.iter().map(|p| p.line).collect();
    assert_eq!(lines, [1, 2, 3, 5]);
    assert!(out.problems[0].message.contains("MAILTO is not translated"));
    assert!(out.problems[2]
        .message
        .contains("CRON_TZ in effect (line 2)"));
    assert!(out.problems[3]
        .render("f")
        .starts_with("f:5: invalid schedule"));
    assert_eq!(out.job_count, 1);
    assert_eq!(load(&out.jobs)[0].name, "c");
}

#[test]
fn rewrite_keeps_every_line_and_wraps_the_jobs() {
    let text = "# hi\nSHELL=/bin/bash\n-*/5 * * * * root date +\\%F >> /tmp/x %in\\%put%2\nbad\n";
    let options = Options {
        system: true,
        rewrite: Some(Rewrite {
            program: "/usr/bin/heartbeat-agent".into(),
        }),
    };
    let out = run(text, &options);
    let crontab = out.crontab.expect("rewrite returns the crontab");
    let lines: Vec<&str> = crontab.lines().collect();
    assert_eq!(lines[..2], ["# hi", "SHELL=/bin/bash"]);
    assert_eq!(
        lines[2],
        "-*/5 * * * * root /usr/bin/heartbeat-agent run --job date -- /bin/bash -c \
         'date +\\%F >> /tmp/x '%in\\%put%2"
    );
    assert_eq!(lines[3], "bad");
    assert_eq!(out.problems.len(), 1);
    assert!(out.problems[0].message.contains("left unchanged"));
    let jobs = load(&out.jobs);
    assert_eq!(jobs[0].action, crate::config::JobAction::External);
    // The rewritten line reads back as the same schedule, user and input.
    let Ok(Line::Entry(entry)) = line::classify(lines[2], true) else {
        panic!("rewritten line is not an entry")
    };
    let command = line::split_percent(&entry.raw_command);
    // Rewriting the rewritten crontab changes nothing and says why.
    let again = run(&crontab, &options);
    assert_eq!(again.crontab.as_deref(), Some(crontab.as_str()));
    assert!(again.problems[0].message.contains("already runs through"));
    assert!(command.script.ends_with("-c 'date +%F >> /tmp/x '"));
    assert_eq!(command.stdin.as_deref(), Some("in%put\n2"));
}

/// Found by the cargo-fuzz target `crontab` (fuzz/): a variable whose value holds a NUL byte
/// went into every later job's `env`, which the config refuses.
#[test]
fn a_variable_with_a_nul_byte_is_reported_and_the_jobs_still_load() {
    let text = "PATH=/usr/bin:\0/bin\n17 * * * * root run-parts /etc/cron.hourly\n";
    let system = Options {
        system: true,
        ..Options::default()
    };
    let imported = run(text, &system);
    assert_eq!(imported.job_count, 1);
    assert!(!imported.jobs.contains("PATH"), "{}", imported.jobs);
    assert_eq!(
        imported.problems[0].message,
        "the value of PATH contains a NUL byte; it is not imported"
    );
    load(&imported.jobs);
}

/// A NUL byte in a job's command or user column: the line is reported, never imported as a
/// `shell` or `user` the config would refuse; the other jobs still load.
#[test]
fn a_job_line_with_a_nul_byte_is_reported_and_not_imported() {
    let text = "@daily /usr/bin/backup\0 --full\n@hourly /usr/bin/rotate\n";
    let imported = run(text, &Options::default());
    assert_eq!(imported.job_count, 1);
    assert!(
        !imported.jobs.to_lowercase().contains("\\u0000") && !imported.jobs.contains('\0'),
        "{:?}",
        imported.jobs
    );
    assert!(
        imported.jobs.contains("/usr/bin/rotate"),
        "{}",
        imported.jobs
    );
    assert_eq!(
        imported.problems[0].message,
        "the line contains a NUL byte; the line is not imported"
    );
    let system = Options {
        system: true,
        ..Options::default()
    };
    let imported = run("17 * * * * ro\0ot run-parts /etc/cron.hourly\n", &system);
    assert_eq!(imported.job_count, 0);
    assert!(
        !imported.jobs.to_lowercase().contains("\\u0000") && !imported.jobs.contains('\0'),
        "{:?}",
        imported.jobs
    );
    load(&imported.jobs);
}

/// Found by the crontab property test (tests/reliability/properties.rs): `SHELL=` made every
/// later job `shell_program = ""`, which the config refuses.
#[test]
fn an_empty_shell_is_reported_and_the_jobs_still_load() {
    let imported = run("SHELL=\n@weekly sh -c 'exit 3'\n", &Options::default());
    assert_eq!(imported.job_count, 1);
    assert!(
        !imported.jobs.contains("shell_program"),
        "{}",
        imported.jobs
    );
    assert_eq!(
        imported.problems[0].message,
        "SHELL is empty; the jobs after it run with /bin/sh (the default)"
    );
    load(&imported.jobs);
}
