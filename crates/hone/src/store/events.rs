//! The append-only side of a run: its event log (triggers in the database refuse updates and
//! deletes) and the calls of its mechanisms' hooks.

use super::{int, now, text, Cells, Effect, Hook, MechanismCall, Store, StoreError, Val};

/// A query of mechanism calls (the columns [`Store::mechanism_calls`] reads by position) of
/// run `?1` where `$cond` also holds, in the order they were made.
macro_rules! calls_where {
    ($cond:literal) => {
        concat!(
            "SELECT experiment, mechanism, hook, effect, detail FROM mechanism_calls \
             WHERE run_id = ?1",
            $cond,
            " ORDER BY id"
        )
    };
}

/// Every call of a run. On SQLite an index keeps them in that order (`mechanism_calls_in_order`):
/// none is sorted. (PostgreSQL sorts them: a migration for it would make older hones refuse a
/// shared store, for a few milliseconds of a report.)
pub(super) const CALLS_OF_RUN: &str = calls_where!("");

/// The calls made for experiment `?2` (in rowid order under `mechanism_calls_by_run`).
pub(super) const CALLS_OF_EXPERIMENT: &str = calls_where!(" AND experiment = ?2");

impl Store {
    /// Appends to the event log (never updated or deleted: triggers refuse it).
    pub fn append_event(
        &self,
        run_id: i64,
        experiment: Option<u64>,
        kind: &str,
        data: &serde_json::Value,
    ) -> Result<(), StoreError> {
        let data = data.to_string();
        self.exec(
            "INSERT INTO events (run_id, experiment, at, kind, data) VALUES (?1, ?2, ?3, ?4, ?5)",
            &[
                Val::Int(Some(run_id)),
                Val::Int(experiment.map(|n| n.min(i64::MAX as u64) as i64)),
                Val::Real(Some(now())),
                text(kind),
                text(&data),
            ],
        )?;
        Ok(())
    }

    /// Records mechanism hook calls of a run (one transaction).
    pub fn put_mechanism_calls(
        &self,
        run_id: i64,
        calls: &[MechanismCall],
    ) -> Result<(), StoreError> {
        if calls.is_empty() {
            return Ok(());
        }
        let at = now();
        self.in_transaction(|s| {
            for c in calls {
                s.exec(
                    "INSERT INTO mechanism_calls (run_id, experiment, mechanism, hook, effect, detail, at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    &[
                        Val::Int(Some(run_id)),
                        int(c.experiment),
                        text(&c.mechanism),
                        text(c.hook.as_str()),
                        text(c.effect.as_str()),
                        text(&c.detail),
                        Val::Real(Some(at)),
                    ],
                )?;
            }
            Ok(())
        })
    }

    /// Mechanism hook calls of a run (of one experiment, when given), in order.
    pub fn mechanism_calls(
        &self,
        run_id: i64,
        experiment: Option<u64>,
    ) -> Result<Vec<MechanismCall>, StoreError> {
        // By position (a run's report reads every call): the columns of `calls_where`, in order.
        let read = |r: &dyn Cells| {
            let text = |i: usize| {
                r.text_at(i)?
                    .ok_or_else(|| StoreError::Corrupt(format!("column {i} of a call is NULL")))
            };
            Ok(MechanismCall {
                experiment: r.int_at(0)?.unwrap_or(0).max(0) as u64,
                mechanism: text(1)?,
                hook: Hook::parse(&text(2)?),
                effect: Effect::parse(&text(3)?),
                detail: text(4)?,
            })
        };
        match experiment {
            None => self.query(CALLS_OF_RUN, &[Val::Int(Some(run_id))], read),
            Some(n) => self.query(CALLS_OF_EXPERIMENT, &[Val::Int(Some(run_id)), int(n)], read),
        }
    }

    /// The data of the events of kind `kind` that experiment `n` of a run recorded, in
    /// order (read by the database, not by walking every event of the run).
    pub fn events_of(&self, run_id: i64, n: u64, kind: &str) -> Result<Vec<String>, StoreError> {
        self.query(
            "SELECT data FROM events WHERE run_id = ?1 AND experiment = ?2 AND kind = ?3 ORDER BY id",
            &[Val::Int(Some(run_id)), int(n), text(kind)],
            |r| r.req_text("data"),
        )
    }

    /// Events of a run as (experiment, kind, data), in order.
    pub fn events(&self, run_id: i64) -> Result<Vec<(Option<u64>, String, String)>, StoreError> {
        self.query(
            "SELECT experiment, kind, data FROM events WHERE run_id = ?1 ORDER BY id",
            &[Val::Int(Some(run_id))],
            |r| {
                Ok((
                    r.int("experiment")?.map(|v| v.max(0) as u64),
                    r.req_text("kind")?,
                    r.req_text("data")?,
                ))
            },
        )
    }
}
