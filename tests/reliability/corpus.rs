//! The bad-config corpus (`tests/data/bad-configs`): every broken file gives exactly its
//! recorded message with file:line:col, exit 78 and no panic, from `config check` and `daemon`.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::util::Home;

fn corpus_dir() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/bad-configs"
    ))
}

/// Runs `heartbeat-agent ARGS --config NAME` in the corpus directory (so messages name the
/// file as `NAME.toml`), with a clean environment and a bounded run time.
fn agent_in(dir: &Path, home: &Home, args: &[&str], config: &str) -> Output {
    agent_within(dir, home, args, config, std::time::Duration::from_secs(20))
}

/// [`agent_in`], failing after `limit`.
fn agent_within(
    dir: &Path,
    home: &Home,
    args: &[&str],
    config: &str,
    limit: std::time::Duration,
) -> Output {
    let mut cmd = home.agent();
    cmd.current_dir(dir).args(args).args(["--config", config]);
    let child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn the agent");
    super::wait_bounded(child, limit)
}

fn corpus() -> Vec<(String, String)> {
    let mut cases: Vec<(String, String)> = std::fs::read_dir(corpus_dir())
        .expect("the corpus directory")
        .map(|entry| entry.expect("a corpus entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "toml"))
        .map(|path| {
            let name = path
                .file_name()
                .expect("a file name")
                .to_string_lossy()
                .into_owned();
            let expected = std::fs::read_to_string(path.with_extension("expected"))
                .unwrap_or_else(|e| panic!("{name} needs its .expected file: {e}"));
            (name, expected)
        })
        .collect();
    cases.sort();
    cases
}

#[test]
fn every_broken_config_gives_its_own_message_and_exit_78_from_config_check() {
    let home = Home::new();
    let cases = corpus();
    assert!(
        cases.len() >= 30,
        "the corpus shrank: {} cases",
        cases.len()
    );
    let mut failures = Vec::new();
    for (name, expected) in &cases {
        let out = agent_in(&corpus_dir(), &home, &["config", "check"], name);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.code() != Some(78) || stderr != *expected || stderr.contains("panicked") {
            failures.push(format!(
                "{name}: exit {:?}\n--- expected\n{expected}--- got\n{stderr}",
                out.status.code()
            ));
        }
        let first = expected.lines().next().unwrap_or_default();
        assert!(
            first.starts_with(&format!("{name}:")),
            "{name}: the message must name the file first: {first}"
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_daemon_refuses_every_broken_config_with_the_same_problems_and_exit_78() {
    let home = Home::new();
    let mut failures = Vec::new();
    for (name, expected) in corpus() {
        let out = agent_in(&corpus_dir(), &home, &["daemon"], &name);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let problems: Vec<&str> = expected
            .lines()
            .filter(|l| !l.starts_with("heartbeat-agent: configuration"))
            .collect();
        let all_named = problems.iter().all(|p| stderr.contains(p));
        if out.status.code() != Some(78)
            || !all_named
            || !stderr.contains("the daemon did not start")
            || stderr.contains("panicked")
        {
            failures.push(format!("{name}: exit {:?}\n{stderr}", out.status.code()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_config_path_that_is_a_directory_or_missing_is_exit_78_naming_it() {
    let home = Home::new();
    let dir = home.config_path();
    std::fs::create_dir(&dir).expect("a directory where the config should be");
    let missing = home.path("absent.toml");
    for (path, why) in [(&dir, "directory"), (&missing, "not found")] {
        for args in [&["config", "check"][..], &["daemon"][..]] {
            let out = agent_in(home.root(), &home, args, &path.to_string_lossy());
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(78), "{args:?} {stderr}");
            assert!(
                stderr.contains(&*path.to_string_lossy()) && stderr.contains(why),
                "{args:?}: {stderr}"
            );
            assert!(!stderr.contains("panicked"), "{stderr}");
        }
    }
}

/// Problems are placed (file:line:col) in time linear in the file: 20,000 broken jobs are all
/// reported, each at its own line, well within the bound. Placing each problem by counting the
/// lines before it took 13 s (release) and over 4 minutes (debug) for this file.
#[test]
fn twenty_thousand_broken_jobs_are_all_reported_in_linear_time() {
    const JOBS: usize = 20_000;
    let home = Home::new();
    let text: String = (0..JOBS)
        .map(|i| {
            format!("[[jobs]]\nname = \"job{i}\"\nschedule = \"bogus\"\ncommand = [\"true\"]\n\n")
        })
        .collect();
    std::fs::write(home.path("many.toml"), text).expect("write the config");
    let started = std::time::Instant::now();
    // Generous for a debug build on a loaded machine; the quadratic version needed minutes.
    let limit = std::time::Duration::from_secs(90);
    let out = agent_within(home.root(), &home, &["config", "check"], "many.toml", limit);
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(78),
        "{}",
        &stderr[..stderr.len().min(2000)]
    );
    let problems: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("many.toml:"))
        .collect();
    assert_eq!(problems.len(), JOBS, "every broken job is reported");
    // Job i's schedule is on line 5*i + 3, column 12.
    for (i, line) in problems.iter().enumerate() {
        let place = format!(
            "many.toml:{}:12: job \"job{i}\": key `schedule`:",
            5 * i + 3
        );
        assert!(line.starts_with(&place), "problem {i}: {line}");
    }
    assert!(
        stderr.ends_with(&format!("is invalid: {JOBS} problems\n")),
        "{}",
        &stderr[stderr.len().saturating_sub(300)..]
    );
    eprintln!("{JOBS} broken jobs reported in {took:?}");
}
