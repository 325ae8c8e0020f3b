//! A day of runs at a glance: a daemon whose jobs ran over the last 24 hours ([`Seeded`]: the
//! earlier runs made by `run --job` under libfaketime, a run of each triggered through the
//! daemon), read by the dashboard's browser test (`super::dashboard`) and by `status`, whose
//! table of it fits 80 columns.

use std::time::Duration;

use heartbeat_agent::status::client::Endpoint;

use super::{emulator_with_check, free_port, job, status_doc, tcp_daemon, StatusHome, TOKEN};
use crate::util::{table_row, Home};

/// The jobs of [`Seeded`]: each with its schedule (a cron expression in a time zone), the
/// hours ago of its runs recorded before the daemon started, its outcome, and the words of its
/// last run.
pub const SEEDED: [(&str, &str, &[u32], &str); 3] = [
    // More runs than `status` has room for in its RECENT strip.
    (
        "backup",
        "30 3 * * 1-5",
        &[23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1],
        "success",
    ),
    ("report", "0 */6 * * *", &[14, 3], "failed"),
    ("cleanup", "15 2 * * *", &[5], "timed_out"),
];

/// A daemon on 127.0.0.1 with the jobs of [`SEEDED`] and a day of their runs: each job's
/// earlier runs made by `run --job` under libfaketime at their hours ago, then one run each
/// triggered through the daemon, all pings delivered. `None` without libfaketime.
pub struct Seeded {
    /// The service, with check c1 (backup's); kept running with the daemon.
    _emulator: crate::util::emulator::Background,
    pub home: Home,
    /// Stopped when dropped.
    _daemon: crate::util::daemon::Daemon,
    pub port: u16,
    pub key: String,
}

impl Seeded {
    pub fn start() -> Option<Seeded> {
        crate::util::faketime("+0s")?;
        let emulator = emulator_with_check();
        let key = emulator.api_key().to_owned();
        let home = Home::new();
        let port = free_port();
        let commands = [
            "shell = \"echo backed up 42 files\"\ncheck_id = \"c1\"\n[jobs.check]\nperiod = \"1d\"\n"
                .to_owned(),
            format!(
                "shell = \"echo 'token {TOKEN} key '$LEAK' <script>alert(1)</script>'; exit 3\"\n\
                 env = {{ LEAK = \"{key}\" }}\n"
            ),
            "timeout = \"1s\"\ncommand = [\"sleep\", \"30\"]\n".to_owned(),
        ];
        let jobs: String = SEEDED
            .iter()
            .zip(&commands)
            .map(|((name, schedule, _, _), command)| {
                format!(
                    "[[jobs]]\nname = \"{name}\"\nschedule = \"{schedule}\"\n\
                     timezone = \"Europe/Berlin\"\n{command}\n"
                )
            })
            .collect();
        home.write(
            Some(&emulator),
            &format!("listen = \"127.0.0.1:{port}\"\ntoken = \"{TOKEN}\""),
            &jobs,
        );
        for (name, _, hours, _) in SEEDED {
            for ago in hours {
                let clock = crate::util::faketime(&format!("-{ago}h"))?;
                let out = home
                    .agent()
                    .arg("--config")
                    .arg(home.config_path())
                    .args(["run", "--job", name])
                    .env("EMULATOR_KEY", &key)
                    .envs(clock)
                    .output()
                    .expect("run --job");
                assert!(
                    out.status.code().is_some(),
                    "{name} {ago}h ago: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
        let daemon = tcp_daemon(&home, port, &key, &[]);
        for (name, _, _, _) in SEEDED {
            let out = home.output(&["trigger", name], &key);
            assert_eq!(out.status.code(), Some(0), "trigger {name}: {out:?}");
        }
        let endpoint = Endpoint::parse(&format!("http://127.0.0.1:{port}")).expect("url");
        daemon.until("each job's runs recorded", Duration::from_secs(30), || {
            let doc = status_doc(&endpoint, true);
            SEEDED
                .iter()
                .all(|(name, _, hours, _)| {
                    let job = job(&doc, name);
                    job["recent"].as_array().map(Vec::len) == Some(hours.len() + 1)
                        && job["running"] == 0
                        && job["outbox_pending"] == 0
                })
                .then_some(())
        });
        Some(Seeded {
            _emulator: emulator,
            home,
            _daemon: daemon,
            port,
            key,
        })
    }

    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

#[test]
fn the_status_table_of_a_day_of_runs_fits_80_columns() {
    let Some(seeded) = Seeded::start() else {
        return;
    };
    let out = seeded.home.output(&["status"], &seeded.key);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let table = String::from_utf8(out.stdout).expect("UTF-8");
    for line in table.lines() {
        assert!(
            line.chars().count() <= 80,
            "{} characters: {line}\n{table}",
            line.chars().count()
        );
    }
    for (name, _, hours, outcome) in SEEDED {
        let cells = table_row(&table, name);
        assert_eq!(cells.len(), 7, "{name}: {cells:?}\n{table}");
        assert!(cells[2].contains(outcome), "{name}: {cells:?}");
        // The strip gives way to the other cells, the newest outcomes kept.
        let mark = if outcome == "success" { "✓" } else { "✗" };
        let shown = cells[3].chars().count();
        assert!(
            shown >= 1 && cells[3] == mark.repeat(shown),
            "{name}: {cells:?}"
        );
        if hours.len() < 3 {
            assert_eq!(shown, hours.len() + 1, "{name}'s runs all fit: {cells:?}");
        }
    }
    let backup = table_row(&table, "backup")[3].chars().count();
    assert!(
        backup < 13,
        "backup's 13 outcomes did not give way:\n{table}"
    );
    assert_eq!(table_row(&table, "backup")[4], "accepted", "{table}");
    assert_eq!(table_row(&table, "report")[6], "no_check", "{table}");
    eprintln!("{table}");
}
