//! When a new heartbeat period is sent: a period change that would restart the service's timer
//! is held until the job's next accepted ping (the engine with an injected `now` across a
//! weekend, `sync` showing the held change and sending the rest, `run --job` sending it right
//! after its ping and never after a failure), and a daily job's period across both DST changes.

use heartbeat_agent::api::ApiClient;
use heartbeat_agent::net::RetryPolicy;
use heartbeat_agent::sync::{self, CadenceCache, SyncOptions, SyncOutcome};
use serde_json::{json, Value};

use super::{at, client, job, load, text, Setup};

fn heartbeat_puts(setup: &Setup) -> Vec<Value> {
    setup
        .puts()
        .into_iter()
        .map(|(_, _, body)| body["heartbeat"].clone())
        .collect()
}

fn pass(setup: &Setup, client: &ApiClient, now: &str) -> Vec<SyncOutcome> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let config = load(setup);
    let report = runtime.block_on(sync::sync_all(
        &config,
        client,
        &setup.state_dir(),
        &SyncOptions::at(at(now)),
        &mut CadenceCache::default(),
    ));
    report.jobs.into_iter().map(|j| j.outcome).collect()
}

#[test]
fn weekdays_across_a_weekend_three_days_after_fridays_ping_one_day_after_mondays() {
    let setup = Setup::new(&["w"]);
    setup.write_config(&job("weekday", "0 9 * * 1-5", "w", ""));
    let client = client(&setup, RetryPolicy::none());
    let hb = |period: u64, grace: u64, unit: &str| {
        json!({"period": period, "periodUnit": "days", "grace": grace, "graceUnit": unit,
               "pingToken": crate::util::emulator::token_for("w")})
    };
    let ping = |fire: &str, when: &str| {
        sync::timer::record_ping(
            &setup.state_dir(),
            &heartbeat_agent::persist::Failures::default(),
            "weekday",
            "w",
            at(fire),
            at(when),
        )
        .unwrap();
    };
    // Thursday: one day (the first PUT learns the token, so it carries none).
    assert_eq!(
        pass(&setup, &client, "2026-11-19T10:00:00Z"),
        [SyncOutcome::Updated]
    );
    // Friday's fire, before its run pinged: three days would restart the service's timer and
    // hide a failure of Friday's run, so the change is held.
    assert_eq!(
        pass(&setup, &client, "2026-11-20T09:00:01Z"),
        [SyncOutcome::Held]
    );
    // Right after Friday's accepted ping: three days.
    ping("2026-11-20T09:00:00Z", "2026-11-20T09:02:00Z");
    assert_eq!(
        pass(&setup, &client, "2026-11-20T09:02:01Z"),
        [SyncOutcome::Updated]
    );
    assert_eq!(
        pass(&setup, &client, "2026-11-22T12:00:00Z"),
        [SyncOutcome::InSync]
    );
    // Monday's fire: the shorter period waits for Monday's accepted ping.
    assert_eq!(
        pass(&setup, &client, "2026-11-23T09:00:01Z"),
        [SyncOutcome::InSync]
    );
    ping("2026-11-23T09:00:00Z", "2026-11-23T09:00:04Z");
    assert_eq!(
        pass(&setup, &client, "2026-11-23T09:00:05Z"),
        [SyncOutcome::Updated]
    );
    // Friday's run fails (no ping): nothing changes at or after its fire, so the one-day
    // period set after Thursday's ping alarms on time.
    ping("2026-11-26T09:00:00Z", "2026-11-26T09:00:04Z");
    assert_eq!(
        pass(&setup, &client, "2026-11-26T09:00:05Z"),
        [SyncOutcome::InSync]
    );
    for now in [
        "2026-11-27T09:00:01Z",
        "2026-11-27T12:00:00Z",
        "2026-11-28T12:00:00Z",
    ] {
        assert_eq!(pass(&setup, &client, now), [SyncOutcome::Held], "at {now}");
    }
    let puts = heartbeat_puts(&setup);
    assert_eq!(puts.len(), 3);
    assert_eq!(puts[0]["period"], 1);
    assert_eq!(puts[1], hb(3, 1, "hours"));
    assert_eq!(puts[2], hb(1, 1, "hours"));
}

#[test]
fn sync_shows_a_held_period_change_and_sends_the_rest() {
    let setup = Setup::new(&["h"]);
    setup.write_config(&job("hourly", "@hourly", "h", ""));
    assert_eq!(setup.agent(&["sync"]).status.code(), Some(0));
    // A new schedule and a tag: the tag goes now, the period waits for the next ping.
    setup.write_config(&job(
        "hourly",
        "*/30 * * * *",
        "h",
        "[jobs.check]\ntags = [\"new\"]",
    ));
    let out = setup.agent(&["sync"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.starts_with("hourly (check h): updated\n  tags: (none) -> [\"new\"]\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("  held until the job's next accepted ping (a new period or a re-activation restarts the service's timer):\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("\n    heartbeat.period: 1 -> 30\n"),
        "{stdout}"
    );
    let last = setup.puts().pop().unwrap().2;
    assert_eq!(last["heartbeat"]["period"], 1, "the period is not sent yet");
    assert_eq!(last["tags"], json!(["new"]));
    let again = setup.agent(&["sync", "--json"]);
    let report: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(report["jobs"][0]["result"], "held", "{report}");
    let held = report["jobs"][0]["held"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        held.iter().any(|c| c["field"] == "heartbeat.period"),
        "{report}"
    );
    assert_eq!(again.status.code(), Some(0), "a held change is no failure");
}

#[test]
fn daily_in_berlin_sends_nothing_new_across_both_dst_changes() {
    let setup = Setup::new(&["d"]);
    setup.write_config(&job("daily", "@daily", "d", "timezone = \"Europe/Berlin\""));
    let client = client(&setup, RetryPolicy::none());
    assert_eq!(
        pass(&setup, &client, "2026-03-27T12:00:00Z"),
        [SyncOutcome::Updated]
    );
    for now in [
        "2026-03-28T23:00:01Z",
        "2026-03-29T22:00:01Z",
        "2026-10-24T22:00:01Z",
        "2026-10-25T23:00:01Z",
    ] {
        assert_eq!(
            pass(&setup, &client, now),
            [SyncOutcome::InSync],
            "at {now}"
        );
    }
    assert_eq!(
        heartbeat_puts(&setup),
        [json!({"period": 1, "periodUnit": "days", "grace": 2, "graceUnit": "hours"})]
    );
}

/// `@every` against the emulator: `sync` PUTs the interval itself as the period (90 s in
/// seconds), and a one-day interval keeps one day with no DST slack in a zone with DST.
#[test]
fn an_every_schedule_puts_its_interval_as_the_period() {
    let setup = Setup::new(&["e"]);
    setup.write_config(&job("every", "@every 90s", "e", ""));
    let out = setup.agent(&["sync"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    assert!(shown.contains("  heartbeat.period: 1 -> 90\n"), "{shown}");
    assert_eq!(
        heartbeat_puts(&setup),
        [json!({"period": 90, "periodUnit": "seconds", "grace": 1, "graceUnit": "minutes"})]
    );
    let check = setup.emulator.heartbeat_check("e").unwrap();
    assert_eq!(check["heartbeat"]["period"], 90, "{check}");
    assert_eq!(check["heartbeat"]["periodUnit"], "seconds", "{check}");

    let daily = Setup::new(&["d"]);
    daily.write_config(&job(
        "daily",
        "@every 1d",
        "d",
        "timezone = \"America/New_York\"",
    ));
    let client = client(&daily, RetryPolicy::none());
    assert_eq!(
        pass(&daily, &client, "2026-10-30T12:00:00Z"),
        [SyncOutcome::Updated]
    );
    for now in [
        "2026-10-31T00:00:01Z",
        "2026-11-01T00:00:01Z",
        "2026-11-02T00:00:01Z",
    ] {
        assert_eq!(
            pass(&daily, &client, now),
            [SyncOutcome::InSync],
            "at {now}"
        );
    }
    assert_eq!(
        heartbeat_puts(&daily),
        [json!({"period": 1, "periodUnit": "days", "grace": 1, "graceUnit": "hours"})]
    );
}

#[test]
fn run_job_sends_a_held_period_change_right_after_its_ping_and_never_after_a_failure() {
    let setup = Setup::new(&["e"]);
    setup.write_config(&job("ext", "*/30 * * * *", "e", ""));
    assert_eq!(setup.agent(&["sync"]).status.code(), Some(0));
    // A new schedule: the period change waits for the job's next accepted ping.
    setup.write_config(&job("ext", "@hourly", "e", ""));
    let held = setup.agent(&["sync", "--json"]);
    let report: Value = serde_json::from_slice(&held.stdout).unwrap();
    assert_eq!(report["jobs"][0]["result"], "held", "{report}");
    let puts_before = setup.puts().len();
    // A failed run pings nothing and sends nothing.
    let failed = setup.agent(&["run", "--job", "ext", "--", "false"]);
    assert_eq!(failed.status.code(), Some(1), "{}", text(&failed.stderr));
    assert_eq!(setup.puts().len(), puts_before, "no PUT after a failed run");
    // A good run: its ping, then at once the held period.
    let good = setup.agent(&["run", "--job", "ext", "--", "true"]);
    assert_eq!(good.status.code(), Some(0), "{}", text(&good.stderr));
    let requests = setup.emulator.requests();
    let ping = requests
        .iter()
        .find(|r| {
            r.path
                .ends_with(&format!("/{}", crate::util::emulator::token_for("e")))
        })
        .expect("the run pinged");
    let put = requests.iter().rfind(|r| r.method == "PUT").unwrap();
    assert!(put.seq > ping.seq, "the PUT follows the ping");
    let body: Value = serde_json::from_str(&put.body).unwrap();
    assert_eq!(body["heartbeat"]["period"], 1);
    assert_eq!(body["heartbeat"]["periodUnit"], "hours");
    assert_eq!(setup.puts().len(), puts_before + 1);
    let state = sync::state::load(&setup.state_dir(), "ext").unwrap();
    assert!(
        state.acked_at.is_some() && state.acked_fire.is_some(),
        "{state:?}"
    );
    let again = setup.agent(&["sync"]);
    assert!(text(&again.stdout).starts_with("ext (check e): in_sync\n"));
}
