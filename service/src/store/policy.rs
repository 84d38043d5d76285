//! Approval acceptance (schema version 16): the last policy probe
//! (`providers check NAME --policy`) of each provider definition, keyed by
//! its fingerprint, so a changed definition is never shown the verdict of
//! an older one.
//!
//! What must stay true: a record holds only what the probe established
//! (its [`PolicyProbe`]: the controller's own evidence apart from what the
//! agent said), written by the writer; a newer probe of the same
//! definition replaces it.

use rusqlite::params;

use crate::domain::StoreResult;
use lapis_protocol::probe::PolicyProbe;

/// A stored probe: (provider, fingerprint, checked at, probe).
pub(crate) type StoredProbe = (String, String, i64, PolicyProbe);

impl super::Store {
    /// Records the probe of `provider` under definition `fingerprint`;
    /// returns when (ms since the epoch).
    pub(crate) async fn record_policy_probe(
        &self,
        provider: &str,
        fingerprint: &str,
        probe: &PolicyProbe,
    ) -> StoreResult<i64> {
        let (provider, fingerprint) = (provider.to_owned(), fingerprint.to_owned());
        let json = serde_json::to_string(probe)
            .map_err(|_| crate::domain::StoreError::invalid("probe does not serialize"))?;
        self.op(move |w| {
            w.write(|tx, _, _, now| {
                tx.prepare_cached(
                    "INSERT INTO policy_probes (fingerprint, provider, probe, checked_at) \
                     VALUES (?1, ?2, ?3, ?4) ON CONFLICT(fingerprint) DO UPDATE SET \
                     provider = excluded.provider, probe = excluded.probe, \
                     checked_at = excluded.checked_at",
                )?
                .execute(params![fingerprint, provider, json, now])?;
                Ok(now)
            })
        })
        .await
    }

    /// The recorded verdict of the probe of definition `fingerprint`, if
    /// any (an `ask` turn of a definition found `ignored` is refused).
    pub(crate) async fn policy_verdict(
        &self,
        fingerprint: &str,
    ) -> StoreResult<Option<lapis_protocol::probe::PolicyVerdict>> {
        let fingerprint = fingerprint.to_owned();
        self.read(move |c, _| {
            let json: Option<String> = c
                .prepare_cached("SELECT probe FROM policy_probes WHERE fingerprint = ?1")?
                .query_row([&fingerprint], |r| r.get(0))
                .map(Some)
                .or_else(|e| match e {
                    rusqlite::Error::QueryReturnedNoRows => Ok(None),
                    e => Err(e),
                })?;
            Ok(json
                .and_then(|j| serde_json::from_str::<PolicyProbe>(&j).ok())
                .map(|p| p.verdict))
        })
        .await
    }

    /// Every recorded probe, newest first.
    pub(crate) async fn policy_probes(&self) -> StoreResult<Vec<StoredProbe>> {
        self.read(|c, _| {
            let mut stmt = c.prepare_cached(
                "SELECT provider, fingerprint, checked_at, probe FROM policy_probes \
                 ORDER BY checked_at DESC, fingerprint",
            )?;
            let rows = stmt.query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, String>(3)?,
                ))
            })?;
            let mut out = Vec::new();
            for row in rows {
                let (provider, fingerprint, at, json) = row?;
                // Startup validation refused a record that does not parse.
                if let Ok(p) = serde_json::from_str::<PolicyProbe>(&json) {
                    out.push((provider, fingerprint, at, p));
                }
            }
            Ok(out)
        })
        .await
    }
}
