//! The run history against the real binary: the daemon's runs and `run --job`'s kept under
//! the state directory, read back by `history` (files, or the endpoint), `GET
//! /jobs/{name}/runs` and the `status` strip; bounded on disk by the documented formula;
//! a torn record skipped and repaired; a removed job's history removed after its keep time;
//! nothing lost over twenty `kill -9` of the daemon, nor by a `kill -9` while the ping host
//! hangs; no secret kept by a cut or printed before sync learned it.

use std::process::Output;

use serde_json::Value;

use crate::util::Home;

mod crash;
mod daemon;
mod order;
mod pages;
mod run_job;
mod secrets;
mod unknown;

/// `heartbeat-agent --config <home's> ARGS`, its environment clean, no colour.
fn agent(home: &Home, args: &[&str]) -> Output {
    home.agent()
        .arg("--config")
        .arg(home.config_path())
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("run the agent")
}

/// `history --json ARGS` parsed, after checking it exited 0.
fn history_json(home: &Home, args: &[&str]) -> Value {
    let mut all = vec!["history", "--json"];
    all.extend_from_slice(args);
    let out = agent(home, &all);
    assert!(
        out.status.success(),
        "history failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("history --json prints JSON")
}

/// The runs of a one-job answer (`{"job", "runs"}`).
fn runs(doc: &Value) -> &Vec<Value> {
    doc["runs"].as_array().expect("runs")
}

/// The rows of a table printed with at least two spaces between columns, as a reader reads
/// them: each row's cells cut at the (ASCII) header's column starts, counted in characters.
fn table(text: &str) -> Vec<Vec<String>> {
    let mut lines = text.lines();
    let header: Vec<char> = lines.next().expect("a header line").chars().collect();
    let starts: Vec<usize> = (0..header.len())
        .filter(|&i| {
            header[i] != ' ' && (i == 0 || (i >= 2 && header[i - 1] == ' ' && header[i - 2] == ' '))
        })
        .collect();
    std::iter::once(header.iter().collect::<String>())
        .chain(lines.map(str::to_owned))
        .map(|line| {
            let chars: Vec<char> = line.chars().collect();
            starts
                .iter()
                .enumerate()
                .map(|(n, &from)| {
                    let to = if n + 1 == starts.len() {
                        chars.len()
                    } else {
                        starts[n + 1].min(chars.len())
                    };
                    chars
                        .get(from.min(chars.len())..to)
                        .map_or_else(String::new, |c| {
                            c.iter().collect::<String>().trim().to_owned()
                        })
                })
                .collect()
        })
        .collect()
}
