//! Starting the emulator from any integration test: in an async test (`start`), or in a plain
//! `#[test]` that runs the binary with `std::process::Command` (`Background`, which owns a
//! runtime thread for the emulator).

use std::ops::Deref;
use std::path::PathBuf;

use heartbeat_agent::emulator::{Emulator, EmulatorHandle, EmulatorOptions, Fixtures};

/// `config/emulator-fixtures.json`, the example fixtures.
pub fn example_fixtures_path() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/config/emulator-fixtures.json"
    ))
}

/// The example fixtures, parsed.
pub fn example_fixtures() -> Fixtures {
    Fixtures::from_file(&example_fixtures_path()).expect("the example fixtures are valid")
}

/// Starts an emulator with the example fixtures on 127.0.0.1 port 0 (inside a tokio runtime).
pub async fn start() -> EmulatorHandle {
    start_with(EmulatorOptions {
        fixtures: example_fixtures(),
        ..EmulatorOptions::default()
    })
    .await
}

/// Starts an emulator with the given options (inside a tokio runtime).
pub async fn start_with(options: EmulatorOptions) -> EmulatorHandle {
    Emulator::start(options).await.expect("the emulator starts")
}

/// An emulator served by its own runtime, for synchronous tests. Derefs to the handle.
pub struct Background {
    handle: Option<EmulatorHandle>,
    runtime: tokio::runtime::Runtime,
}

impl Background {
    /// Starts an emulator with the example fixtures.
    pub fn start() -> Self {
        Self::start_with(EmulatorOptions {
            fixtures: example_fixtures(),
            ..EmulatorOptions::default()
        })
    }

    /// Starts an emulator with the given options.
    pub fn start_with(options: EmulatorOptions) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime for the emulator");
        let handle = runtime.block_on(start_with(options));
        Background {
            handle: Some(handle),
            runtime,
        }
    }
}

impl Deref for Background {
    type Target = EmulatorHandle;

    fn deref(&self) -> &EmulatorHandle {
        self.handle.as_ref().expect("present until drop")
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(handle) = self.handle.take() {
            self.runtime.block_on(handle.shutdown());
        }
    }
}
