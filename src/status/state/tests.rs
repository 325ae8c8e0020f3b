use super::*;

#[test]
fn a_404_makes_a_check_missing_whatever_sync_recorded() {
    for sync in [None, Some(CheckState::InSync), Some(CheckState::Pending)] {
        let facts = CheckFacts {
            sync,
            missing: MissingBy::first(true, sync, false),
            owned_by: None,
        };
        assert_eq!(facts.state(), Some(CheckState::Missing), "{sync:?}");
        assert_eq!(facts.missing, Some(MissingBy::Ping));
    }
    let by_sync = MissingBy::first(false, Some(CheckState::Missing), true);
    assert_eq!(
        by_sync,
        Some(MissingBy::Sync),
        "sync's 404 before the remote view's"
    );
    assert_eq!(
        MissingBy::first(false, Some(CheckState::InSync), true),
        Some(MissingBy::Remote)
    );
    assert_eq!(
        MissingBy::first(false, Some(CheckState::InSync), false),
        None
    );
}

#[test]
fn another_agents_check_is_owned_by_other_unless_it_is_gone() {
    let owned = CheckFacts {
        sync: Some(CheckState::InSync),
        missing: None,
        owned_by: Some("agent 3f9c"),
    };
    assert_eq!(owned.state(), Some(CheckState::OwnedByOther));
    let gone = CheckFacts {
        missing: Some(MissingBy::Sync),
        ..owned
    };
    assert_eq!(gone.state(), Some(CheckState::Missing));
    assert_eq!(CheckFacts::default().state(), None, "no check, no state");
}

#[test]
fn each_state_has_one_word_and_is_found_by_it() {
    for state in CheckState::ALL {
        assert_eq!(CheckState::named(state.as_str()), Some(state));
        assert!(!state.as_str().contains(' '), "{state:?}");
    }
    assert_eq!(
        CheckState::ALL.map(CheckState::as_str),
        ["in_sync", "pending", "failed", "missing", "owned_by_other"]
    );
    for state in [
        SyncState::Pending,
        SyncState::InSync,
        SyncState::Failed,
        SyncState::Missing,
    ] {
        assert_eq!(CheckState::from(state).as_str(), state.as_str());
    }
}

#[test]
fn the_sync_cell_says_the_state_or_the_drift_but_never_drift_of_a_missing_check() {
    let drift = ["heartbeat.period".to_owned()];
    assert_eq!(
        sync_cell(Some(CheckState::InSync), &[]),
        ("in_sync".to_owned(), Tone::Good)
    );
    assert_eq!(
        sync_cell(Some(CheckState::Pending), &drift),
        ("drift: heartbeat.period".to_owned(), Tone::Warn)
    );
    assert_eq!(
        sync_cell(Some(CheckState::Missing), &drift),
        ("missing".to_owned(), Tone::Bad)
    );
    assert_eq!(sync_cell(None, &[]), ("-".to_owned(), Tone::Plain));
}

#[test]
fn a_run_is_told_by_its_outcome_word() {
    assert_eq!(run_phrase("success", Some(0), None, 1), "success");
    assert_eq!(run_phrase("failed", Some(3), None, 1), "failed (exit 3)");
    assert_eq!(
        run_phrase("timed_out", None, Some(15), 2),
        "timed_out after 2 attempts",
        "the timeout's own SIGTERM is not news"
    );
    assert_eq!(
        run_phrase("signaled", None, Some(9), 1),
        "signaled (signal 9)"
    );
    assert_eq!(run_phrase("not_started", None, None, 1), "not_started");
    for outcome in RunOutcome::ALL {
        let word = outcome.as_str();
        assert!(run_phrase(word, Some(1), Some(9), 1).starts_with(word));
    }
    assert_eq!(run_tone("success"), Tone::Good);
    assert_eq!(run_tone("stopped"), Tone::Warn);
    assert_eq!(run_tone("timed_out"), Tone::Bad);
}

#[test]
fn the_service_state_of_a_missing_check_is_missing() {
    let unavailable = Remote::Unavailable {
        reason: "not fetched".into(),
    };
    assert_eq!(
        ServiceState::of(&unavailable, Some(CheckState::Missing)),
        ServiceState::Missing
    );
    assert_eq!(
        ServiceState::of(&unavailable, Some(CheckState::InSync)),
        ServiceState::Unknown
    );
    assert_eq!(ServiceState::listed(Some(true)).as_str(), "failing");
    assert_eq!(ServiceState::listed(Some(false)).as_str(), "up");
    assert_eq!(ServiceState::listed(None).as_str(), "not_listed");
}

#[test]
fn a_404_ping_says_gone_until_the_service_accepts_that_check_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ping = Utc::now();
    let answered = |status| (ping, false, Some(status));
    assert!(ping_says_gone(dir.path(), "made", "c1", answered(404)));
    assert!(!ping_says_gone(dir.path(), "made", "c1", answered(500)));
    assert!(!ping_says_gone(
        dir.path(),
        "made",
        "c1",
        (ping, true, Some(200))
    ));
    // The check made again after its deletion (or a PUT answered 200) after the ping.
    let later = ping + chrono::TimeDelta::seconds(5);
    crate::sync::state::update(
        dir.path(),
        &crate::persist::Failures::default(),
        "made",
        "c2",
        |s| s.accepted_at = Some(later),
    )
    .expect("record");
    assert!(!ping_says_gone(dir.path(), "made", "c2", answered(404)));
    assert!(
        ping_says_gone(dir.path(), "made", "c1", answered(404)),
        "another check's record says nothing of c1"
    );
    let earlier = ping - chrono::TimeDelta::seconds(5);
    crate::sync::state::update(
        dir.path(),
        &crate::persist::Failures::default(),
        "made",
        "c2",
        |s| s.accepted_at = Some(earlier),
    )
    .expect("record");
    assert!(
        ping_says_gone(dir.path(), "made", "c2", answered(404)),
        "accepted before the ping: the 404 is newer"
    );
}
