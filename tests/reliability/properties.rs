//! Property tests on stable Rust, with seeded random input (the seed is printed; set
//! `RELIABILITY_SEED` to replay one, `RELIABILITY_SCALE` to multiply the iteration counts, as
//! `scripts/fuzz.sh` does): the config parser, the schedule parser, the crontab importer and the
//! API response parsing never panic on any input, and what they accept is consistent.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use chrono::{DateTime, TimeZone, Utc};
use heartbeat_agent::api::model;
use heartbeat_agent::config::Config;
use heartbeat_agent::import::crontab::{import, Options};
use heartbeat_agent::schedule::Schedule;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use crate::util::Home;

/// The iteration count `base`, scaled by `RELIABILITY_SCALE` (default 1).
fn iterations(base: usize) -> usize {
    let scale: f64 = std::env::var("RELIABILITY_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    ((base as f64) * scale).max(1.0) as usize
}

/// A generator seeded by `RELIABILITY_SEED`, else by `default` (CI stays reproducible).
fn rng(test: &str, default: u64) -> StdRng {
    let seed = std::env::var("RELIABILITY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default);
    eprintln!("{test}: seed {seed} (replay with RELIABILITY_SEED={seed})");
    StdRng::seed_from_u64(seed)
}

/// Runs `f(input)`, failing with the input when it panics.
fn no_panic<T>(what: &str, input: &str, f: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(value) => value,
        Err(_) => {
            panic!("{what} panicked on this input (keep it as a regression test):\n{input:?}")
        }
    }
}

const TOKENS: &[&str] = &[
    "\"",
    "'",
    "[",
    "]",
    "[[jobs]]",
    "[jobs.check]",
    "[jobs.watch]",
    "=",
    "\n",
    ",",
    "{",
    "}",
    "-1",
    "0",
    "30",
    "\"30\"",
    "\"30s\"",
    "\"1e400s\"",
    "99999999999999999999",
    "true",
    "\"* * *\"",
    "\"@daily\"",
    "\"*/0 * * * *\"",
    "\"0 0 31 2 *\"",
    "\"ü\"",
    "\u{0}",
    "#",
    "name = \"x\"",
    "schedule = \"* * * * * *\"",
    "period = \"1s\"",
    "grace = \"400d\"",
    "timezone = \"Mars/Olympus\"",
    "command = []",
    "shell = \"\"",
    "kind = \"disk\"",
    "\"100%\"",
    "\"-5%\"",
    "nan",
    "inf",
    "1.5",
    "\"\\u0000\"",
    "\"1h30\"",
    "\"9999999999d\"",
];

/// One random edit of `lines`.
fn mutate(rng: &mut StdRng, lines: &mut Vec<String>) {
    if lines.is_empty() {
        lines.push(String::new());
    }
    let i = rng.gen_range(0..lines.len());
    match rng.gen_range(0..6) {
        0 => {
            lines.remove(i);
        }
        1 => {
            let copy = lines[i].clone();
            lines.insert(rng.gen_range(0..=lines.len()), copy);
        }
        2 => {
            let j = rng.gen_range(0..lines.len());
            lines.swap(i, j);
        }
        3 => {
            let token = TOKENS.choose(rng).expect("tokens");
            let chars: Vec<char> = lines[i].chars().collect();
            let at = rng.gen_range(0..=chars.len());
            lines[i] = chars[..at].iter().collect::<String>()
                + token
                + &chars[at..].iter().collect::<String>();
        }
        4 => {
            let chars: Vec<char> = lines[i].chars().collect();
            if !chars.is_empty() {
                let a = rng.gen_range(0..chars.len());
                let b = rng.gen_range(a..=chars.len());
                lines[i] = chars[..a].iter().chain(&chars[b..]).collect();
            }
        }
        _ => {
            if let Some(eq) = lines[i].find(" = ") {
                let token = TOKENS.choose(rng).expect("tokens");
                lines[i] = format!("{} = {token}", &lines[i][..eq]);
            }
        }
    }
}

/// `path:LINE:COL: ...`, or `path: ...` for problems of the whole file.
fn names_its_place(problem: &str, path: &str) -> bool {
    let Some(rest) = problem.strip_prefix(path).and_then(|r| r.strip_prefix(':')) else {
        return false;
    };
    let mut parts = rest.splitn(3, ':');
    let line = parts.next().unwrap_or_default();
    let col = parts.next().unwrap_or_default();
    rest.starts_with(' ')
        || (line.parse::<usize>().is_ok_and(|n| n > 0) && col.parse::<usize>().is_ok_and(|n| n > 0))
}

fn example_config() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/config/example.toml"))
        .expect("config/example.toml")
}

/// Mutants of `config/example.toml`, `n` of them.
fn config_mutants(rng: &mut StdRng, n: usize) -> Vec<String> {
    let example = example_config();
    (0..n)
        .map(|_| {
            let mut lines: Vec<String> = example.lines().map(str::to_owned).collect();
            for _ in 0..rng.gen_range(1..=4) {
                mutate(rng, &mut lines);
            }
            lines.join("\n")
        })
        .collect()
}

#[test]
fn random_mutations_of_the_example_config_never_panic_and_errors_name_their_place() {
    let mut rng = rng("config", 9_001);
    let (mut ok, mut refused) = (0, 0);
    for text in config_mutants(&mut rng, iterations(300)) {
        let loaded = no_panic("the config parser", &text, || {
            Config::from_text(Path::new("example.toml"), &text)
        });
        match loaded {
            Ok(_) => ok += 1,
            Err(err) => {
                refused += 1;
                assert!(
                    !err.problems.is_empty(),
                    "an error without a problem: {text:?}"
                );
                for problem in &err.problems {
                    assert!(
                        names_its_place(problem, "example.toml"),
                        "{problem}\nfor input:\n{text:?}"
                    );
                }
            }
        }
    }
    eprintln!("config mutants: {ok} accepted, {refused} refused");
    assert!(refused > 0 && ok > 0, "the mutations must hit both sides");
}

#[test]
fn the_binary_exits_0_or_78_on_config_mutants_and_never_panics() {
    let mut rng = rng("config binary", 9_002);
    let home = Home::new();
    let path = home.path("example.toml");
    for text in config_mutants(&mut rng, iterations(25)) {
        std::fs::write(&path, &text).expect("write the mutant");
        let out = home
            .agent()
            .args(["config", "check", "--config"])
            .arg(&path)
            .output()
            .expect("run config check");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            matches!(out.status.code(), Some(0 | 78)) && !stderr.contains("panicked"),
            "exit {:?}: {stderr}\nfor input:\n{text:?}",
            out.status.code()
        );
    }
}

/// A random crontab field: numbers, names, ranges, steps and lists, sometimes broken.
fn cron_field(rng: &mut StdRng) -> String {
    const ATOMS: &[&str] = &[
        "*",
        "0",
        "1",
        "5",
        "7",
        "12",
        "23",
        "29",
        "30",
        "31",
        "59",
        "60",
        "61",
        "99",
        "mon",
        "Fri",
        "jan",
        "DEC",
        "sun",
        "L",
        "?",
        "W",
        "#",
        "",
        "-",
        "/",
        ",",
        "x",
        "4294967296",
    ];
    let mut field = String::new();
    for part in 0..rng.gen_range(1..=3) {
        if part > 0 {
            field.push(',');
        }
        field.push_str(ATOMS.choose(rng).expect("atoms"));
        if rng.gen_bool(0.3) {
            field.push('-');
            field.push_str(ATOMS.choose(rng).expect("atoms"));
        }
        if rng.gen_bool(0.3) {
            field.push('/');
            field.push_str(ATOMS.choose(rng).expect("atoms"));
        }
    }
    field
}

fn random_schedule(rng: &mut StdRng) -> String {
    match rng.gen_range(0..10) {
        0 => [
            "@daily",
            "@hourly",
            "@reboot",
            "@weekly",
            "@yearly",
            "@",
            "@every 5m",
            "@Daily",
        ]
        .choose(rng)
        .expect("macros")
        .to_string(),
        1 => (0..rng.gen_range(0..40))
            .map(|_| {
                *b"0123456789*/,-@ LW#?abcxyzMONJAN\t"
                    .choose(rng)
                    .expect("bytes") as char
            })
            .collect(),
        _ => {
            let fields = if rng.gen_bool(0.3) { 6 } else { 5 };
            (0..fields)
                .map(|_| cron_field(rng))
                .collect::<Vec<_>>()
                .join(" ")
        }
    }
}

#[test]
fn random_schedules_never_panic_and_valid_ones_round_trip() {
    let mut rng = rng("schedule", 9_003);
    let zones = [
        heartbeat_agent::schedule::Zone::UTC,
        heartbeat_agent::schedule::Zone::named("Europe/Berlin").expect("a known zone"),
        heartbeat_agent::schedule::Zone::named("America/New_York").expect("a known zone"),
        heartbeat_agent::schedule::Zone::named("Australia/Lord_Howe").expect("a known zone"),
    ];
    let (mut valid, mut invalid) = (0, 0);
    for _ in 0..iterations(4_000) {
        let expr = random_schedule(&mut rng);
        let Ok(schedule) = no_panic("Schedule::parse", &expr, || Schedule::parse(&expr)) else {
            invalid += 1;
            continue;
        };
        valid += 1;
        let again = Schedule::parse(&schedule.to_string())
            .unwrap_or_else(|e| panic!("{expr:?} parsed, its display did not: {e}"));
        let tz = *zones.choose(&mut rng).expect("zones");
        let start: DateTime<Utc> = Utc
            .timestamp_opt(rng.gen_range(0..4_102_444_800), 0)
            .single()
            .expect("a valid timestamp");
        let mut at = start;
        for _ in 0..3 {
            let next = no_panic("next_after", &expr, || schedule.next_after(at, tz));
            assert_eq!(
                next,
                again.next_after(at, tz),
                "{expr:?} does not round-trip"
            );
            match next {
                Some(next) => {
                    assert!(next > at, "{expr:?}: next fire {next} is not after {at}");
                    at = next;
                }
                None => break,
            }
        }
    }
    eprintln!("schedules: {valid} valid, {invalid} refused");
    assert!(valid > 0 && invalid > 0);
}

fn crontab_line(rng: &mut StdRng) -> String {
    const COMMANDS: &[&str] = &[
        "/usr/bin/backup --full",
        "echo 100% > /tmp/x",
        "cd /srv && make",
        "'quoted arg' \"x\"",
        "heartbeat-agent run --job x -- true",
        "curl -fsS https://ping.example.com/t",
        "\\%",
        "",
        "  ",
        "a%b%c",
        "sh -c 'exit 3' # comment",
        "ü 😀",
        "\u{0}",
        "/usr/bin/backup\u{0} --to /srv",
    ];
    match rng.gen_range(0..8) {
        0 => format!(
            "{}={}",
            ["MAILTO", "SHELL", "PATH", "CRON_TZ", "TZ", "X Y", ""]
                .choose(rng)
                .expect("vars"),
            ["", "/bin/bash", "Europe/Berlin", "\"quoted\"", "Mars/X"]
                .choose(rng)
                .expect("values")
        ),
        1 => "# a comment".to_owned(),
        2 => (0..rng.gen_range(0..30))
            .map(|_| *b" *@/,-0123456789abc%=#\"'\\".choose(rng).expect("bytes") as char)
            .collect(),
        3 => format!(
            "{} root {}",
            random_schedule(rng),
            COMMANDS.choose(rng).expect("cmds")
        ),
        _ => format!(
            "{} {}",
            random_schedule(rng),
            COMMANDS.choose(rng).expect("cmds")
        ),
    }
}

#[test]
fn random_crontabs_never_panic_and_what_is_imported_always_loads() {
    let mut rng = rng("crontab", 9_004);
    let mut imported_jobs = 0;
    for _ in 0..iterations(1_500) {
        let text: String = (0..rng.gen_range(1..8))
            .map(|_| crontab_line(&mut rng) + "\n")
            .collect();
        let options = Options {
            system: rng.gen_bool(0.3),
            ..Options::default()
        };
        let result = no_panic("the crontab importer", &text, || {
            import(&text, "crontab", &options)
        });
        if result.job_count == 0 {
            continue;
        }
        imported_jobs += result.job_count;
        // No program can be given a NUL byte, and the config refuses one: never imported.
        assert!(
            !result.jobs.contains('\0') && !result.jobs.to_lowercase().contains("\\u0000"),
            "a NUL byte was imported:\ncrontab:\n{text:?}\njobs:\n{:?}",
            result.jobs
        );
        if let Err(err) = Config::from_text(Path::new("imported.toml"), &result.jobs) {
            panic!(
                "imported jobs do not load: {:?}\ncrontab:\n{text}\njobs:\n{}",
                err.problems, result.jobs
            );
        }
    }
    eprintln!("crontab: {imported_jobs} jobs imported");
    assert!(imported_jobs > 0);
}

fn random_scalar(rng: &mut StdRng) -> Value {
    match rng.gen_range(0..8) {
        0 => Value::Null,
        1 => json!(rng.gen_bool(0.5)),
        2 => json!(rng.gen_range(-3i64..100_000)),
        3 => json!(i64::MAX),
        4 => json!(1.5e300),
        5 => json!([
            "",
            "x",
            "days",
            "HEARTBEAT",
            "2026-02-30",
            "2026-11-22T03:00:00Z",
            "ü"
        ]
        .choose(rng)
        .expect("strings")),
        6 => json!(u64::MAX),
        _ => json!(-0.0),
    }
}

const KEYS: &[&str] = &[
    "id",
    "name",
    "heartbeat",
    "period",
    "periodUnit",
    "grace",
    "graceUnit",
    "pingUrl",
    "pingToken",
    "tags",
    "activated",
    "muted",
    "statusCode",
    "error",
    "message",
    "attributes",
    "events",
    "stats",
    "alertSettings",
    "retryStrategy",
    "startsAt",
    "endsAt",
    "updates",
    "nextId",
    "length",
    "entries",
    "checkId",
    "state",
    "timestamp",
    "hasFailures",
    "created_at",
];

fn random_value(rng: &mut StdRng, depth: u32) -> Value {
    if depth == 0 || rng.gen_bool(0.4) {
        return random_scalar(rng);
    }
    if rng.gen_bool(0.3) {
        return Value::Array(
            (0..rng.gen_range(0..4))
                .map(|_| random_value(rng, depth - 1))
                .collect(),
        );
    }
    let mut object = serde_json::Map::new();
    for _ in 0..rng.gen_range(0..8) {
        let key = KEYS.choose(rng).expect("keys");
        object.insert((*key).to_owned(), random_value(rng, depth - 1));
    }
    Value::Object(object)
}

/// Replaces a random node of `value` with random JSON, or removes a key.
fn mutate_json(rng: &mut StdRng, value: &mut Value) {
    match value {
        Value::Object(map) if !map.is_empty() && rng.gen_bool(0.7) => {
            let keys: Vec<String> = map.keys().cloned().collect();
            let key = keys.choose(rng).expect("non-empty");
            match rng.gen_range(0..3) {
                0 => {
                    map.remove(key);
                }
                1 => mutate_json(rng, map.get_mut(key).expect("present")),
                _ => {
                    map.insert(key.clone(), random_value(rng, 2));
                }
            }
        }
        Value::Array(items) if !items.is_empty() && rng.gen_bool(0.7) => {
            let i = rng.gen_range(0..items.len());
            mutate_json(rng, &mut items[i]);
        }
        _ => *value = random_value(rng, 2),
    }
}

#[test]
fn random_json_shaped_like_api_responses_never_panics_the_model_types() {
    let mut rng = rng("api responses", 9_005);
    let emulator = crate::util::emulator::Background::start();
    let check = emulator
        .add_heartbeat_check(&json!({"name": "fuzzed", "tags": ["a"]}))
        .expect("a check");
    let seeds = [
        check,
        json!({"statusCode": 429, "error": "Too Many Requests", "message": "x", "attributes": {}}),
        json!([{"name": "n", "checkId": "c", "hasFailures": false}]),
        json!({"entries": [], "nextId": null, "length": 0}),
    ];
    let mut accepted = 0;
    for i in 0..iterations(6_000) {
        let mut value = if i % 3 == 0 {
            random_value(&mut rng, 4)
        } else {
            seeds.choose(&mut rng).expect("seeds").clone()
        };
        for _ in 0..rng.gen_range(1..=3) {
            mutate_json(&mut rng, &mut value);
        }
        let mut text = value.to_string();
        if rng.gen_bool(0.2) && !text.is_empty() {
            // A broken byte, or a cut: malformed JSON.
            let at = rng.gen_range(0..text.len());
            text = text.chars().take(at).collect();
        }
        accepted += no_panic("a model type", &text, || {
            model::parses_as_answers(text.as_bytes())
        });
    }
    eprintln!("api responses: {accepted} parses accepted");
    assert!(accepted > 0);
}
