//! Importing job definitions from other schedulers into `[[jobs]]` tables: crontab(5)
//! (`heartbeat-agent import crontab`). Everything here returns text and problems; printing is
//! the CLI's job. `docs/import.md` is the user's description.

pub mod crontab;
