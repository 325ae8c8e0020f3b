//! The config parser on arbitrary text: never panics, and every refusal names its place
//! (`fuzz.toml:LINE:COL: ...`, or `fuzz.toml: ...` for a problem of the whole file).
#![no_main]

use std::path::Path;

use heartbeat_agent::config::Config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(err) = Config::from_text(Path::new("fuzz.toml"), text) {
        assert!(!err.problems.is_empty(), "a refusal without a problem");
        for problem in &err.problems {
            let problem = problem.to_string();
            assert!(names_its_place(&problem), "{problem}");
        }
    }
});

/// `fuzz.toml:LINE:COL...` with LINE and COL from 1, or `fuzz.toml: ...`.
fn names_its_place(problem: &str) -> bool {
    let Some(rest) = problem.strip_prefix("fuzz.toml") else {
        return false;
    };
    if rest.starts_with(": ") {
        return true;
    }
    let mut parts = rest.trim_start_matches(':').splitn(3, ':');
    let positive = |s: Option<&str>| {
        s.and_then(|s| s.parse::<usize>().ok())
            .is_some_and(|n| n > 0)
    };
    positive(parts.next()) && positive(parts.next())
}
