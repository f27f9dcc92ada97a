//! A run's row: creating it, finding it by tag, the newest and all of them, where it stands
//! and how long it has been active, and the cheap mark of its progress that a watcher polls.

use super::sql::run_from_row;
use crate::spec::AgentKind;
use crate::verify::Direction;

use super::{now, text, RunRecord, RunState, Store, StoreError, Val};

/// What changes when a run makes progress: compared between two polls, it tells a watcher
/// (the dashboard's event stream) that something new was written, without reading the rows.
#[derive(Clone, Debug, PartialEq, Default, serde::Serialize)]
pub struct RunChangeMark {
    pub experiments: u64,
    pub running: u64,
    /// The newest experiment's last write (finish, else start), in seconds since the epoch.
    pub last_write: f64,
    pub last_event: i64,
    pub state: String,
    /// Points recorded so far by the experiments still running (`[verify] progress`): a live
    /// curve changes the run's pages while nothing else does.
    pub live_points: u64,
}

impl Store {
    /// A run of the built-in optimizer on the branch `hone/<tag>`, minimizing `metric`, with
    /// seed 1 and nothing sealed or recorded of its spec: what tests, benchmarks and
    /// examples fill with experiments of their own.
    pub fn create_plain_run(
        &self,
        tag: &str,
        base_commit: &str,
        metric: &str,
    ) -> Result<RunRecord, StoreError> {
        self.create_run(
            tag,
            &format!("hone/{tag}"),
            base_commit,
            1,
            AgentKind::Knobs,
            metric,
            Direction::Minimize,
            "{}",
            "{}",
        )
    }

    #[allow(clippy::too_many_arguments)]
    pub fn create_run(
        &self,
        tag: &str,
        branch: &str,
        base_commit: &str,
        seed: u64,
        agent: AgentKind,
        metric: &str,
        direction: Direction,
        seals: &str,
        spec_json: &str,
    ) -> Result<RunRecord, StoreError> {
        let id = self
            .query_opt(
                "INSERT INTO runs (repo, tag, branch, base_commit, created_at, seed, agent, metric, direction, state, seals, spec_json)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 'running', ?10, ?11) RETURNING id",
                &[
                    text(&self.repo),
                    text(tag),
                    text(branch),
                    text(base_commit),
                    Val::Real(Some(now())),
                    Val::Int(Some(seed as i64)),
                    text(agent.as_str()),
                    text(metric),
                    text(direction.as_str()),
                    text(seals),
                    text(spec_json),
                ],
                |r| r.req_int("id"),
            )?
            .ok_or_else(|| StoreError::Corrupt("a new run has no id".into()))?;
        self.query_opt(
            "SELECT * FROM runs WHERE id = ?1",
            &[Val::Int(Some(id))],
            run_from_row,
        )?
        .ok_or_else(|| StoreError::Corrupt(format!("run {id} vanished")))
    }

    /// The run with this tag.
    pub fn run_by_tag(&self, tag: &str) -> Result<Option<RunRecord>, StoreError> {
        self.query_opt(
            "SELECT * FROM runs WHERE repo = ?1 AND tag = ?2",
            &[text(&self.repo), text(tag)],
            run_from_row,
        )
    }

    /// All runs, oldest first.
    pub fn runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        self.query(
            "SELECT * FROM runs WHERE repo = ?1 ORDER BY id",
            &[text(&self.repo)],
            run_from_row,
        )
    }

    /// The latest run, if any: the one whose newest experiment started last.
    pub fn latest_run(&self) -> Result<Option<RunRecord>, StoreError> {
        // The run that last did something: its newest experiment started last (a run resumed
        // after a newer one was made is the latest again), else the newest made.
        self.query_opt(
            "SELECT * FROM runs r WHERE repo = ?1 ORDER BY COALESCE(
                 (SELECT e.started_at FROM experiments e WHERE e.run_id = r.id
                  ORDER BY e.n DESC LIMIT 1),
                 r.created_at) DESC, r.id DESC LIMIT 1",
            &[text(&self.repo)],
            run_from_row,
        )
    }

    pub fn set_active_seconds(&self, run_id: i64, secs: f64) -> Result<(), StoreError> {
        self.exec(
            "UPDATE runs SET active_seconds = ?2 WHERE id = ?1",
            &[Val::Int(Some(run_id)), Val::Real(Some(secs))],
        )?;
        Ok(())
    }

    /// Records where a run stands and why its session ended.
    pub fn set_run_state(
        &self,
        run_id: i64,
        state: RunState,
        reason: Option<&str>,
    ) -> Result<(), StoreError> {
        self.exec(
            "UPDATE runs SET state = ?2, stop_reason = ?3 WHERE id = ?1",
            &[
                Val::Int(Some(run_id)),
                text(state.as_str()),
                Val::Text(reason),
            ],
        )?;
        Ok(())
    }

    /// Changes what a run measures (only before its baseline measured anything).
    pub fn set_run_objective(
        &self,
        run_id: i64,
        metric: &str,
        direction: crate::verify::Direction,
    ) -> Result<(), StoreError> {
        self.exec(
            "UPDATE runs SET metric = ?2, direction = ?3 WHERE id = ?1",
            &[
                Val::Int(Some(run_id)),
                text(metric),
                text(direction.as_str()),
            ],
        )?;
        Ok(())
    }

    /// Records the proposer a run goes on with (`hone run --agent` on a resume).
    pub fn set_run_agent(
        &self,
        run_id: i64,
        agent: crate::spec::AgentKind,
    ) -> Result<(), StoreError> {
        self.exec(
            "UPDATE runs SET agent = ?2 WHERE id = ?1",
            &[Val::Int(Some(run_id)), text(agent.as_str())],
        )?;
        Ok(())
    }

    /// Replaces the spec recorded with a run (its budget changed on resume).
    pub fn set_run_spec(&self, run_id: i64, spec_json: &str) -> Result<(), StoreError> {
        self.exec(
            "UPDATE runs SET spec_json = ?2 WHERE id = ?1",
            &[Val::Int(Some(run_id)), text(spec_json)],
        )?;
        Ok(())
    }

    /// A cheap mark of a run's progress (see [`RunChangeMark`]); `None` when there is no such
    /// run. The count comes from the run's tallies, the rest by index: no query here reads
    /// every experiment.
    pub fn run_change_mark(&self, run_id: i64) -> Result<Option<RunChangeMark>, StoreError> {
        self.query_opt(
            "SELECT (SELECT CAST(COALESCE(SUM(experiments), 0) AS BIGINT) FROM run_tallies
                        WHERE run_id = ?1) AS experiments,
                    (SELECT COUNT(*) FROM experiments WHERE run_id = ?1 AND status = 'running') AS running,
                    (SELECT COALESCE(finished_at, started_at) FROM experiments
                        WHERE run_id = ?1 ORDER BY n DESC LIMIT 1) AS last_write,
                    (SELECT MAX(id) FROM events WHERE run_id = ?1) AS last_event,
                    (SELECT COUNT(*) FROM curves WHERE run_id = ?1 AND experiment IN
                        (SELECT n FROM experiments WHERE run_id = ?1 AND status = 'running'))
                        AS live_points,
                    state
             FROM runs WHERE id = ?1",
            &[Val::Int(Some(run_id))],
            |r| {
                Ok(RunChangeMark {
                    experiments: r.req_u64("experiments")?,
                    running: r.req_u64("running")?,
                    last_write: r.real("last_write")?.unwrap_or(0.0),
                    last_event: r.int("last_event")?.unwrap_or(0),
                    state: r.req_text("state")?,
                    live_points: r.req_u64("live_points")?,
                })
            },
        )
    }
}
