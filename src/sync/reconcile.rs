//! One reconciliation pass: for every bound check, the desired definition against what the
//! service has: read with `GET /v1/checks/{id}` when the pass reads (`read`: `heartbeat-agent
//! sync`; the daemon's re-assertions) and whenever there is no local record (so a lost state
//! directory or a new `check_id` costs a read, not a `PUT` of every field; a check that has the
//! config's definition is recorded from the read; in the daemon not while its `PUT`s are paced
//! after a 429, re-assertions included), else the one it last accepted (the local
//! record); a PUT only where they differ (or with `force`, or when the daemon re-asserts a check it cannot
//! read: `reassert`), the answer persisted. A field whose value on the service differs from the
//! one it last accepted was edited elsewhere: it is reported as drift ([`super::drift`]) and
//! repaired like any change (a period or activation only right after an accepted ping). A read
//! answered 404 is settled by the `PUT`: answered 404 too, the check is gone. A change that would restart the
//! service's timer waits for the job's next accepted ping ([`super::timer`]). A PUT answered 404
//! means the check is gone (deleted, or a wrong `check_id`): [`SyncOutcome::Missing`], which
//! names the job and check and is not retried by the pass (the daemon holds it until the next
//! re-assertion).
//! Jobs that left the config (a state file, no job) or are disabled get their check
//! deactivated. A failing API fails that job's entry, never the pass; once the API keeps
//! answering 429 the rest of the pass is deferred (429 answers count against the limit), and
//! once a PUT got no answer at all after its retries (the API host refuses connections, is
//! unreachable or does not answer in time) the rest is deferred too: each job would only spend
//! the same retry budget against the same dead host, so the pass ends in one job's budget. The
//! daemon's passes also go through a [`Pacer`]: a PUT it does not allow yet is deferred.
//! A paused job's check is kept deactivated, and the end of a pause re-activates it at once
//! ([`crate::pause`]: explicit acts, not held like sync's own re-activations).
//! A `PUT` carries `tags` only when the agent's own tags changed, then merged with the ones
//! set elsewhere ([`super::tags`]). A job with `create = true` gets its check from
//! [`super::created`]; the pass that created it reports [`SyncOutcome::Created`].

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use crate::schedule::Zone;
use chrono::{DateTime, Utc};
use tokio::time::Instant;

use super::created;
use super::desired::{deactivated, desired, diff, Change, Definition};
use super::drift::{self, Service};
use super::pace::Pacer;
use super::period::timing;
use super::report::{Action, JobReport, SyncOptions, SyncOutcome, SyncReport};
use super::send::PutAnswer;
use super::state::{self, CheckRecord, LearnedUrls};
use super::timer;
use crate::api::ApiClient;
use crate::config::{Config, Job, PingTarget};
use crate::schedule::{cadence, Cadence};

/// Cadences by schedule and zone, measured once per UTC day (the measurement walks a year of
/// fires; the daemon asks after every run).
#[derive(Debug, Default)]
pub struct CadenceCache {
    entries: HashMap<(String, Zone), (chrono::NaiveDate, Option<Cadence>)>,
}

impl CadenceCache {
    /// The cadence of `job`'s schedule at `now`.
    pub fn get(&mut self, job: &Job, now: DateTime<Utc>) -> Option<Cadence> {
        let key = (job.schedule.as_str().to_owned(), job.timezone);
        let today = now.date_naive();
        match self.entries.get(&key) {
            Some((day, cadence)) if *day == today => *cadence,
            _ => {
                let measured = cadence(&job.schedule, job.timezone, now);
                self.entries.insert(key, (today, measured));
                measured
            }
        }
    }
}

/// The definition `job` wants for `check_id` now, given its persisted state.
pub fn desired_for(
    job: &Job,
    known: Option<&CheckRecord>,
    now: DateTime<Utc>,
    cache: &mut CadenceCache,
) -> Option<Definition> {
    let cadence = cache.get(job, now);
    let acked = known.and_then(|s| s.acked_fire);
    let timing = timing(job, cadence.as_ref(), now, acked)?;
    Some(desired(
        job,
        timing,
        known.and_then(|s| s.ping_token.clone()),
        known.and_then(|s| s.accepted.as_ref()),
    ))
}

/// One pass over every bound check of `config` (or only `opts.job`), and every check whose job
/// left it. Requests go through `client` (its rate limiter and retries).
pub async fn sync_all(
    config: &Config,
    client: &ApiClient,
    state_dir: &Path,
    opts: &SyncOptions,
    cache: &mut CadenceCache,
) -> SyncReport {
    sync_paced(config, client, state_dir, opts, cache, None, None).await
}

/// [`sync_all`], with every PUT also allowed by `pacer` (the daemon's fleet-friendly pacing):
/// a PUT it does not allow yet is deferred, every answer is reported to it. Every ping URL
/// learned is also recorded in `learned` (the daemon's URLs in memory).
pub async fn sync_paced(
    config: &Config,
    client: &ApiClient,
    state_dir: &Path,
    opts: &SyncOptions,
    cache: &mut CadenceCache,
    pacer: Option<&Pacer>,
    learned: Option<&LearnedUrls>,
) -> SyncReport {
    let mut report = SyncReport::default();
    let mut halted = None;
    // Created checks carry this agent's owner tag (outside a cluster).
    let config = &*super::owner::stamped(config, state_dir);
    let pass = Pass {
        client,
        state_dir,
        opts,
        pacer,
        learned,
    };
    let wanted = |name: &str| {
        opts.job.as_deref().map_or(true, |only| only == name) && !opts.hold.contains(name)
    };
    let pauses = crate::pause::load(state_dir);
    let mut resumed = Vec::new();
    for job in config.jobs.iter().filter(|j| wanted(&j.name)) {
        // The fields of a check this pass created (shown as changes from nothing).
        let mut made = Vec::new();
        let check_id = match &job.target {
            PingTarget::Check(check_id) => check_id.clone(),
            PingTarget::None if job.check.create => {
                match pass.created(job, cache, created::Reason::New).await {
                    Ok((check_id, fields)) => {
                        made = fields;
                        check_id
                    }
                    Err(entry) => {
                        report.jobs.push(*entry);
                        continue;
                    }
                }
            }
            _ => {
                // A pause without a check (`stop_jobs` only) ends with nothing to send.
                if pauses.ending(&job.name, opts.now) && !opts.dry_run {
                    resumed.push(job.name.clone());
                }
                continue;
            }
        };
        let Some((mut entry, mut ending)) = pass
            .sync_job(job, &check_id, &pauses, cache, &mut halted)
            .await
        else {
            // `@reboot` with an auto period: no fire times, the check is left alone.
            continue;
        };
        if job.check.create && matches!(entry.outcome, SyncOutcome::Missing(_)) && !opts.dry_run {
            // The job's check was deleted on the service: `create = true` makes it again.
            tracing::warn!(
                job = %job.name,
                check = %check_id,
                "the job's check was deleted on the service; creating it again (create = true)"
            );
            created::forget(state_dir, client.metrics().persist_failures(), job);
            match pass.created(job, cache, created::Reason::Deleted).await {
                Ok((check_id, fields)) => {
                    made = fields;
                    if let Some(again) = pass
                        .sync_job(job, &check_id, &pauses, cache, &mut halted)
                        .await
                    {
                        (entry, ending) = again;
                    }
                }
                Err(failed) => entry = *failed,
            }
        }
        let accepted = matches!(entry.outcome, SyncOutcome::Updated | SyncOutcome::InSync);
        if accepted && !made.is_empty() {
            entry.outcome = SyncOutcome::Created;
            entry.changes = made;
        }
        if ending && accepted && !opts.dry_run {
            tracing::info!(job = %job.name, check = %entry.check_id, "pause ended: the check is active again");
            resumed.push(job.name.clone());
        }
        report.jobs.push(entry);
    }
    let failures = client.metrics().persist_failures();
    crate::pause::forget_ended(state_dir, failures, &resumed, opts.now);
    for name in state::jobs(state_dir).into_iter().filter(|n| wanted(n)) {
        let bound = config.job(&name).is_some_and(|j| j.has_synced_check());
        let Some(known) = state::load(state_dir, &name).filter(|_| !bound) else {
            continue;
        };
        let Some(accepted) = known.accepted.clone() else {
            continue;
        };
        let check_id = known.check_id.clone();
        let definition = deactivated(&accepted);
        let entry = pass.reconcile_one(
            &name,
            &check_id,
            Some(known),
            (definition, Vec::new()),
            Action::Deactivate,
            Service::default(),
            &mut halted,
        );
        report.jobs.push(entry.await);
    }
    report
}

/// Why the rest of a pass is not sent.
#[derive(Debug, Clone)]
enum Halt {
    /// The API kept answering 429.
    RateLimited,
    /// A PUT got no answer from the API at this host (`host:port`) after its retries.
    Unreachable(String),
}

/// What every job of a pass shares.
pub(super) struct Pass<'a> {
    pub(super) client: &'a ApiClient,
    pub(super) state_dir: &'a Path,
    pub(super) opts: &'a SyncOptions,
    pub(super) pacer: Option<&'a Pacer>,
    pub(super) learned: Option<&'a LearnedUrls>,
}

impl Pass<'_> {
    /// One bound job's part of the pass: the desired definition against what the service has,
    /// a `PUT` where needed; with whether the job's pause ends now. `None` for a job whose
    /// check is left alone (`@reboot` with an auto period).
    async fn sync_job(
        &self,
        job: &Job,
        check_id: &str,
        pauses: &crate::pause::Pauses,
        cache: &mut CadenceCache,
        halted: &mut Option<Halt>,
    ) -> Option<(JobReport, bool)> {
        let known = state::load(self.state_dir, &job.name).filter(|s| s.check_id == check_id);
        let mut definition = desired_for(job, known.as_ref(), self.opts.now, cache)?;
        let ending = pauses.ending(&job.name, self.opts.now);
        if pauses.in_force(&job.name, self.opts.now).is_some() {
            definition.body.activated = Some(false);
        }
        let service = self
            .service(&job.name, check_id, known.as_ref(), &definition, halted)
            .await;
        let recorded = known.as_ref().is_some_and(|k| k.accepted.is_some());
        // What the service has now is what it holds: later passes that do not read compare
        // with it too, so a held drifted period goes out after the next accepted ping.
        let known = match (
            &service.definition,
            service.drift.is_empty() || self.opts.dry_run,
        ) {
            (Some(remote), false) => {
                let failures = self.client.metrics().persist_failures();
                let remembered =
                    state::update(self.state_dir, failures, &job.name, check_id, |s| {
                        s.accepted = Some(remote.clone());
                    });
                remembered.ok().or(known)
            }
            _ => known,
        };
        // The timer rule weighs the period and activation the service has now, once this agent
        // has sent the check a definition (the first `PUT` goes at once, as without a read).
        let seen = service
            .definition
            .clone()
            .filter(|_| recorded)
            .map(|remote| CheckRecord {
                accepted: Some(remote),
                ..known.clone().unwrap_or_default()
            });
        // The end of a pause is an explicit act: its re-activation is not held (crate::pause).
        let (definition, held) = if ending {
            (definition, Vec::new())
        } else {
            timer::hold(
                job,
                seen.as_ref().or(known.as_ref()),
                definition,
                self.opts.now,
            )
        };
        let entry = self
            .reconcile_one(
                &job.name,
                check_id,
                known,
                (definition, held),
                Action::Update,
                service,
                halted,
            )
            .await;
        Some((entry, ending))
    }

    /// The id of the check of a job with `create = true` (see [`created`]), with the fields this
    /// pass created it with (as changes from nothing; empty when it was there already); the
    /// job's report when there is none to sync yet (`--dry-run`: the `POST` it would send) or
    /// finding or creating it failed.
    async fn created(
        &self,
        job: &Job,
        cache: &mut CadenceCache,
        reason: created::Reason,
    ) -> Result<(String, Vec<Change>), Box<JobReport>> {
        let report = |changes, outcome| {
            Box::new(JobReport {
                job: job.name.clone(),
                check_id: String::new(),
                action: Action::Update,
                changes,
                held: Vec::new(),
                drift: Vec::new(),
                unread: None,
                outcome,
                rate_limited: false,
            })
        };
        let Some(definition) = desired_for(job, None, self.opts.now, cache) else {
            let message = format!(
                "job \"{}\": its check cannot be created: the schedule has no fire times to \
                 derive a period from; set [jobs.check] period",
                job.name
            );
            return Err(report(Vec::new(), SyncOutcome::Failed(message)));
        };
        let lookup = created::Lookup {
            client: self.client,
            state_dir: self.state_dir,
            dry_run: self.opts.dry_run,
            verify: self.opts.read || self.opts.reassert.contains(&job.name),
            now: self.opts.now,
            learned: self.learned,
        };
        match created::resolve(&lookup, job, &definition, reason).await {
            created::Resolved::Known { id, created: false } => Ok((id, Vec::new())),
            created::Resolved::Known { id, created: true } => Ok((id, diff(None, &definition))),
            created::Resolved::WouldCreate => {
                Err(report(diff(None, &definition), SyncOutcome::WouldCreate))
            }
            created::Resolved::Failed(message) => {
                Err(report(Vec::new(), SyncOutcome::Failed(message)))
            }
        }
    }

    /// Reads `check_id` from the service ([`drift::service`]) when this pass reads it: when
    /// nothing was accepted from this agent yet (no record: comparing with nothing would send
    /// every field; in the daemon not while its `PUT`s are paced after a 429, when a read
    /// before each first `PUT` would double a crowded fleet's requests, its re-assertion
    /// included), for `heartbeat-agent sync`, and for the daemon's re-assertions. Not
    /// while the rest of the pass is halted or the pacing holds the job's `PUT` back (the read
    /// goes with the `PUT` it decides; one with no `PUT` after it counts as the job's request in
    /// the pace); a 429 on the read halts the pass like one on a `PUT`.
    async fn service(
        &self,
        job: &str,
        check_id: &str,
        known: Option<&CheckRecord>,
        desired: &Definition,
        halted: &mut Option<Halt>,
    ) -> Service {
        let accepted = known.and_then(|k| k.accepted.as_ref());
        let now = Instant::now();
        // While paced after a 429 (the key is shared and crowded), a check with no record is
        // sent as it was before reads: one request, not two, also when its re-assertion is due
        // (the `PUT` re-asserts it, and a fleet's first re-assertions fall while most of its
        // checks still wait for their first `PUT`).
        let crowded = self.pacer.is_some_and(|p| p.rate(now).is_some());
        let reading = self.opts.read
            || match accepted {
                None => !crowded,
                Some(_) => self.opts.reassert.contains(job),
            };
        let paced = self.pacer.is_some_and(|p| !p.delay(now).is_zero());
        if !reading || halted.is_some() || paced {
            return Service::default();
        }
        let service =
            drift::service(self.client, check_id, accepted, desired, self.opts.dry_run).await;
        if let Some(retry_after) = service.limited {
            if let Some(pacer) = self.pacer {
                pacer.limited(Instant::now(), retry_after, &mut rand::thread_rng());
            }
            *halted = Some(Halt::RateLimited);
        }
        service
    }

    /// Compares, PUTs when needed (and allowed), persists the answer.
    #[allow(clippy::too_many_arguments)]
    async fn reconcile_one(
        &self,
        job: &str,
        check_id: &str,
        known: Option<CheckRecord>,
        (definition, held): (Definition, Vec<Change>),
        action: Action,
        service: Service,
        halted: &mut Option<Halt>,
    ) -> JobReport {
        let accepted = known.as_ref().and_then(|s| s.accepted.as_ref());
        let changes = diff(service.definition.as_ref().or(accepted), &definition);
        let paced = self
            .pacer
            .map_or(Duration::ZERO, |p| p.delay(Instant::now()));
        let mut rate_limited = false;
        // A check read from the service is compared, not re-asserted blindly.
        let reassert = self.opts.reassert.contains(job) && service.definition.is_none();
        let send = self.opts.force || reassert || service.must_put;
        let outcome = if changes.is_empty() && !send {
            // A read with no `PUT` after it is this job's request: the pace counts it.
            if let (Some(pacer), true) = (self.pacer, service.requested) {
                pacer.sent(Instant::now(), &mut rand::thread_rng());
            }
            match (&service.definition, &service.check, accepted) {
                // Nothing was recorded, and the service has the definition: it is the record.
                (Some(remote), Some(check), None) if !self.opts.dry_run => {
                    self.adopt(job, check_id, remote, check, &held)
                }
                _ if held.is_empty() => SyncOutcome::InSync,
                _ => SyncOutcome::Held,
            }
        } else if self.opts.dry_run {
            SyncOutcome::WouldUpdate
        } else if let (Some(_), Some(unread)) = (service.limited, &service.unread) {
            // This job's read was answered 429: its own failure, left to the pacing.
            rate_limited = true;
            SyncOutcome::Failed(format!("job \"{job}\": {unread}"))
        } else if let Some(halt) = halted {
            SyncOutcome::Deferred(match halt {
                Halt::RateLimited => format!(
                    "job \"{job}\": check {check_id}: not sent: the API kept answering 429 (too \
                     many requests) this pass; it is retried later (run sync again)"
                ),
                Halt::Unreachable(host) => format!(
                    "job \"{job}\": check {check_id}: not sent: the API at {host} could not be \
                     reached earlier in this pass; it is retried later (run sync again once the \
                     API answers)"
                ),
            })
        } else if !paced.is_zero() {
            SyncOutcome::Deferred(format!(
                "job \"{job}\": check {check_id}: not sent yet: after a 429 (too many requests) \
                 updates are paced so that agents sharing the API key stay under its limit; \
                 next in {}s",
                paced.as_secs()
            ))
        } else {
            let remote_tags = service.check.as_ref().map(|c| c.tags.as_slice());
            let (outcome, answer) = self
                .put(job, check_id, definition, accepted, remote_tags)
                .await;
            if let Some(pacer) = self.pacer {
                let mut rng = rand::thread_rng();
                match answer {
                    PutAnswer::RateLimited(retry_after) => {
                        pacer.limited(Instant::now(), retry_after, &mut rng);
                    }
                    PutAnswer::Other | PutAnswer::Unanswered => {
                        pacer.sent(Instant::now(), &mut rng)
                    }
                }
            }
            rate_limited = matches!(answer, PutAnswer::RateLimited(_));
            if rate_limited {
                *halted = Some(Halt::RateLimited);
            } else if matches!(answer, PutAnswer::Unanswered) {
                *halted = Some(Halt::Unreachable(self.client.host()));
            }
            outcome
        };
        JobReport {
            job: job.to_owned(),
            check_id: check_id.to_owned(),
            action,
            changes,
            held,
            drift: service.drift,
            unread: service.unread,
            outcome,
            rate_limited,
        }
    }
}
