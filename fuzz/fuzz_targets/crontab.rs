//! The crontab importer on arbitrary text (user and system format): never panics, and what it
//! imports always loads as config.
#![no_main]

use std::path::Path;

use heartbeat_agent::config::Config;
use heartbeat_agent::import::crontab::{import, Options};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((first, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let options = Options {
        system: first & 1 == 1,
        ..Options::default()
    };
    let result = import(text, "crontab", &options);
    if result.job_count > 0 {
        if let Err(err) = Config::from_text(Path::new("imported.toml"), &result.jobs) {
            panic!(
                "imported jobs do not load: {:?}\ncrontab:\n{text}\njobs:\n{}",
                err.problems, result.jobs
            );
        }
    }
});
