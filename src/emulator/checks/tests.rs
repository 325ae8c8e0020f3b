//! Unit tests of the heartbeat checks: the timer (`mod.rs`) and the statistics (`events.rs`).

use super::events::stats;
use super::*;

const TOKEN: &str = "123e4567-e89b-12d3-a456-426614174000";

fn store_with_check(now: DateTime<Utc>) -> Store {
    let mut store = Store::default();
    let body = json!({"id": "c1", "name": "backup", "heartbeat": {
        "period": 1, "periodUnit": "hours", "grace": 10, "graceUnit": "minutes",
        "pingToken": TOKEN}});
    store
        .add_check(body.as_object().expect("object"), now)
        .expect("valid fixture");
    store
}

fn ping_at(store: &mut Store, at: DateTime<Utc>) -> String {
    store.tick(at);
    store
        .ping(TOKEN, at, String::new(), String::new())
        .expect("known token")
        .1
        .state
}

fn failing_at(store: &Store) -> Vec<DateTime<Utc>> {
    let check = &store.checks["c1"];
    let failing = check.events.iter().filter(|e| e.state == "FAILING");
    failing.map(|e| e.at).collect()
}

fn put(store: &mut Store, heartbeat: Value, activated: bool, at: DateTime<Utc>) {
    store.tick(at);
    let body = json!({"script": "", "name": "backup", "activated": activated,
        "heartbeat": heartbeat});
    store
        .put_check("c1", body.as_object().expect("object"), at)
        .expect("valid PUT");
}

fn hours_period(hours: u32, grace_minutes: u32) -> Value {
    json!({"period": hours, "periodUnit": "hours", "grace": grace_minutes,
        "graceUnit": "minutes", "pingToken": TOKEN})
}

#[test]
fn states_follow_the_timer() {
    let t0 = Utc::now();
    let mut store = store_with_check(t0);
    let (mins, secs) = (chrono::Duration::minutes, chrono::Duration::seconds);
    assert_eq!(ping_at(&mut store, t0), "RECEIVED");
    assert_eq!(ping_at(&mut store, t0 + mins(10)), "EARLY");
    assert_eq!(ping_at(&mut store, t0 + mins(70)), "RECEIVED");
    assert_eq!(ping_at(&mut store, t0 + mins(135)), "GRACE");
    // Within the few seconds between the end of grace and the failing mark: LATE.
    let late = t0 + mins(135 + 70) + secs(LATE_WINDOW_SECS);
    assert_eq!(ping_at(&mut store, late), "LATE");
    assert!(failing_at(&store).is_empty(), "a LATE ping is no failure");
    // Past the mark, the check failed and its timer restarted at the mark: the ping is
    // judged against the restarted timer, not LATE.
    let mark = late + mins(70) + secs(LATE_WINDOW_SECS);
    assert_eq!(ping_at(&mut store, mark + mins(5)), "EARLY");
    assert_eq!(failing_at(&store), vec![late + mins(70)]);
    assert!(!store.checks["c1"].failing, "the ping recovers the check");
}

#[test]
fn silence_records_a_failing_event_at_every_restarted_deadline() {
    let t0 = Utc::now();
    let mut store = store_with_check(t0);
    let (mins, secs) = (chrono::Duration::minutes, chrono::Duration::seconds);
    store.tick(t0 + mins(500));
    assert!(
        failing_at(&store).is_empty(),
        "a check never pinged is unarmed"
    );
    ping_at(&mut store, t0);
    store.tick(t0 + mins(70) + secs(LATE_WINDOW_SECS));
    assert!(
        !store.checks["c1"].failing,
        "the mark comes after the LATE window"
    );
    store.tick(t0 + mins(70) + secs(LATE_WINDOW_SECS + 1));
    assert!(store.checks["c1"].failing);
    assert_eq!(failing_at(&store), vec![t0 + mins(70)]);
    // The alert restarted the timer at the mark: one more FAILING per period + grace.
    let mark = t0 + mins(70) + secs(LATE_WINDOW_SECS);
    store.tick(mark + mins(70) + secs(LATE_WINDOW_SECS + 1));
    assert_eq!(
        failing_at(&store),
        vec![t0 + mins(70), mark + mins(70)],
        "the second deadline is the mark + period + grace"
    );
}

#[test]
fn a_new_period_or_reactivation_restarts_the_timer_when_saved() {
    let t0 = Utc::now();
    let (mins, hours) = (chrono::Duration::minutes, chrono::Duration::hours);
    let mut store = store_with_check(t0);
    // Never pinged: a period change does not arm the timer.
    put(&mut store, hours_period(2, 10), true, t0);
    assert_eq!(store.checks["c1"].timer_start, None);
    put(&mut store, hours_period(1, 10), true, t0);
    ping_at(&mut store, t0);
    // Same period in other units, and a grace-only change: no restart.
    let same = json!({"period": 60, "periodUnit": "minutes", "grace": 20,
        "graceUnit": "minutes", "pingToken": TOKEN});
    put(&mut store, same, true, t0 + mins(50));
    assert_eq!(store.checks["c1"].timer_start, Some(t0));
    // A new period restarts the timer at the save: 2 h + 10 min from t0 + 65 min.
    put(&mut store, hours_period(2, 10), true, t0 + mins(65));
    store.tick(t0 + mins(65) + hours(2) + mins(10));
    assert!(
        failing_at(&store).is_empty(),
        "the deadline moved with the save"
    );
    store.tick(t0 + mins(65) + hours(3));
    assert_eq!(
        failing_at(&store),
        vec![t0 + mins(65) + hours(2) + mins(10)]
    );
    // Deactivated: no FAILING however long; re-activation restarts the timer at the save.
    let off = t0 + hours(4);
    put(&mut store, hours_period(1, 10), false, off);
    store.tick(off + hours(48));
    assert_eq!(failing_at(&store).len(), 1, "nothing while deactivated");
    put(&mut store, hours_period(1, 10), true, off + hours(48));
    assert!(
        !store.checks["c1"].failing,
        "re-activation clears the failure"
    );
    assert_eq!(store.checks["c1"].timer_start, Some(off + hours(48)));
    store.tick(off + hours(48) + mins(70));
    assert_eq!(failing_at(&store).len(), 1);
}

/// The checks `Store::tick` looks at: `(mark, id)` of every check filed in `due`.
fn filed(store: &Store) -> Vec<(DateTime<Utc>, String)> {
    store.due.iter().cloned().collect()
}

#[test]
fn only_armed_activated_checks_are_filed_under_their_failing_mark() {
    let t0 = Utc::now();
    let (mins, hours) = (chrono::Duration::minutes, chrono::Duration::hours);
    let late = chrono::Duration::seconds(LATE_WINDOW_SECS);
    let mut store = store_with_check(t0);
    assert!(filed(&store).is_empty(), "a check never pinged never fails");
    ping_at(&mut store, t0);
    assert_eq!(filed(&store), vec![(t0 + mins(70) + late, "c1".to_owned())]);
    // A failure restarts the timer at the mark: filed again one period + grace later.
    store.tick(t0 + mins(71));
    let mark = t0 + mins(70) + late;
    assert_eq!(
        filed(&store),
        vec![(mark + mins(70) + late, "c1".to_owned())]
    );
    // A new period moves the mark; deactivation takes the check out, re-activation files it.
    put(&mut store, hours_period(2, 10), true, t0 + mins(80));
    let moved = t0 + mins(80) + hours(2) + mins(10) + late;
    assert_eq!(filed(&store), vec![(moved, "c1".to_owned())]);
    put(&mut store, hours_period(2, 10), false, t0 + mins(90));
    assert!(filed(&store).is_empty(), "a deactivated check never fails");
    put(&mut store, hours_period(2, 10), true, t0 + mins(95));
    let back = t0 + mins(95) + hours(2) + mins(10) + late;
    assert_eq!(filed(&store), vec![(back, "c1".to_owned())]);
    // A deleted check leaves nothing behind, and one created again with its id is not armed.
    assert!(store.delete_check("c1"));
    assert!(filed(&store).is_empty());
    let again = store_with_check(t0).checks["c1"].object.clone();
    store
        .add_check(&again, t0 + hours(5))
        .expect("id free again");
    assert!(filed(&store).is_empty());
    store.tick(t0 + hours(48));
    assert!(failing_at(&store).is_empty(), "the old timer is gone");
}

#[test]
fn stats_count_failures_per_window() {
    let now = Utc::now();
    let event = |state: &str, hours_ago| Event {
        id: uuid(),
        state: state.into(),
        at: now - chrono::Duration::hours(hours_ago),
        source: String::new(),
        user_agent: String::new(),
    };
    let events = [
        event("RECEIVED", 1),
        event("FAILING", 2),
        event("RECEIVED", 3),
        event("RECEIVED", 30),
    ];
    let day = stats(&events, now, chrono::Duration::hours(24));
    assert_eq!(day.total_entities_current_period, 3);
    let current = day.success_ratio.current_period.expect("number");
    assert!((current - 200.0 / 3.0).abs() < 1e-9);
    assert_eq!(day.success_ratio.previous_period, Some(100.0));
}
