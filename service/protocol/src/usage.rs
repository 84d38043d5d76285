//! Token usage and cost: what agents report (ACP v1 schema 1.7.0) and what
//! the controller records per turn and totals per thread, workspace and
//! application. One definition for the runner's notes, the store's turn
//! records, `status`, the CLI and budgets.
//!
//! The two ACP reports have different semantics, and both are handled:
//! - `usage_update` (a `session/update`, stable since June 2026): `used`
//!   and `size` are the session's context *now*; `cost` is the session's
//!   *cumulative* cost. A turn's cost is therefore the last cumulative cost
//!   it saw minus the last one recorded for the same agent session (zero
//!   for a new session); a lower figure than before (the agent restarted
//!   its count) counts whole.
//! - the prompt response's `usage` (unstable `unstable_end_turn_token_usage`
//!   in the schema): token counts *for this turn*, taken as they are.
//! - `_meta.usage` on an `agent_message_chunk` or `agent_thought_chunk`
//!   (qwen-code's shape, the same members as the response's `usage`): the
//!   counts of *one model call*, sent after each call of the turn's tool
//!   loop; a turn's tokens are their sum ([`TokenUsage::of_chunk`],
//!   [`TokenUsage::add`]). When the prompt response carries `usage` too,
//!   that per-turn figure is the turn's and the chunks' sum is not added to
//!   it (it would count the same calls twice).
//!
//! What must stay true: a turn's [`TurnUsage`] is per turn (never a running
//! total), so totals are plain sums; cost is only ever summed within one
//! currency ([`UsageTotals::cost`] keeps one entry per currency).

use serde::{Deserialize, Serialize};

/// A cost amount. JSON numbers are never NaN, so equality is total.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Amount(pub f64);

impl Eq for Amount {}

/// An amount in one currency (ISO 4217 code, e.g. `USD`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cost {
    /// The amount.
    pub amount: Amount,
    /// ISO 4217 currency code.
    pub currency: String,
}

/// The `usage_update` note: the agent's report as received, without its
/// `sessionUpdate` discriminator: `{"used", "size", "cost"?}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextUsage {
    /// Tokens in the session's context now.
    pub used: u64,
    /// The context window's size in tokens.
    pub size: u64,
    /// The session's cumulative cost, when the agent reports one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<Cost>,
}

/// The `prompt_usage` note: the prompt response's `usage`, this turn's
/// token counts as the agent reported them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsage {
    /// All token kinds together.
    pub total_tokens: u64,
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Reasoning tokens, when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought_tokens: Option<u64>,
    /// Cache read tokens, when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_read_tokens: Option<u64>,
    /// Cache write tokens, when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_write_tokens: Option<u64>,
}

impl TokenUsage {
    /// The counts of one model call an agent reported in a message or
    /// thought chunk's `_meta.usage` (`update` is the `session/update`'s
    /// `update`); `None` for any other update or a `_meta.usage` without
    /// the three counts.
    pub fn of_chunk(update: &serde_json::Value) -> Option<TokenUsage> {
        let kind = update.get("sessionUpdate")?.as_str()?;
        if !matches!(kind, "agent_message_chunk" | "agent_thought_chunk") {
            return None;
        }
        let usage = update.get("_meta")?.get("usage")?;
        serde_json::from_value(usage.clone()).ok()
    }

    /// Adds another report's counts (one more model call of the turn).
    pub fn add(&mut self, other: &TokenUsage) {
        fn sum(a: Option<u64>, b: Option<u64>) -> Option<u64> {
            match (a, b) {
                (None, None) => None,
                (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
            }
        }
        self.total_tokens = self.total_tokens.saturating_add(other.total_tokens);
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.thought_tokens = sum(self.thought_tokens, other.thought_tokens);
        self.cached_read_tokens = sum(self.cached_read_tokens, other.cached_read_tokens);
        self.cached_write_tokens = sum(self.cached_write_tokens, other.cached_write_tokens);
    }
}

/// What one turn used: per-turn figures (see the module docs), on the turn
/// record (`usage`) once the turn ended with any report.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnUsage {
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Cache read tokens.
    pub cached_read_tokens: u64,
    /// Cache write tokens.
    pub cached_write_tokens: u64,
    /// Reasoning tokens.
    pub thought_tokens: u64,
    /// All token kinds together.
    pub total_tokens: u64,
    /// The context in use at the turn's end (last `usage_update`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_used: Option<u64>,
    /// The context window's size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_size: Option<u64>,
    /// This turn's cost (the cumulative figure's growth over the turn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<Cost>,
    /// The agent session's cumulative cost after this turn, as reported:
    /// the next turn on the same session counts from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_cost: Option<Cost>,
}

impl TurnUsage {
    /// A turn's usage from what it reported (`context`: its last
    /// `usage_update`; `tokens`: the prompt response's `usage`) and the
    /// session's cumulative cost recorded before it (`before`, `None` for
    /// a new session). `None` when the turn reported nothing.
    pub fn settle(
        context: Option<&ContextUsage>,
        tokens: Option<&TokenUsage>,
        before: Option<&Cost>,
    ) -> Option<TurnUsage> {
        if context.is_none() && tokens.is_none() {
            return None;
        }
        let t = tokens.cloned().unwrap_or_default();
        let session_cost = context.and_then(|c| c.cost.clone());
        let cost = session_cost.as_ref().map(|now| {
            let base = before
                .filter(|b| b.currency == now.currency && b.amount.0 <= now.amount.0)
                .map_or(0.0, |b| b.amount.0);
            Cost {
                amount: Amount(now.amount.0 - base),
                currency: now.currency.clone(),
            }
        });
        Some(TurnUsage {
            input_tokens: t.input_tokens,
            output_tokens: t.output_tokens,
            cached_read_tokens: t.cached_read_tokens.unwrap_or(0),
            cached_write_tokens: t.cached_write_tokens.unwrap_or(0),
            thought_tokens: t.thought_tokens.unwrap_or(0),
            total_tokens: t.total_tokens,
            context_used: context.map(|c| c.used),
            context_size: context.map(|c| c.size),
            cost,
            session_cost,
        })
    }
}

/// Totals over turns (a thread, a workspace, an application, everything).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageTotals {
    /// Turns with a usage record.
    pub turns: u64,
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Cache read tokens.
    pub cached_read_tokens: u64,
    /// Cache write tokens.
    pub cached_write_tokens: u64,
    /// Reasoning tokens.
    pub thought_tokens: u64,
    /// All token kinds together.
    pub total_tokens: u64,
    /// Cost, one entry per currency (sorted by currency).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cost: Vec<Cost>,
}

impl From<&TurnUsage> for UsageTotals {
    /// One turn's usage as the total of that one turn.
    fn from(u: &TurnUsage) -> UsageTotals {
        UsageTotals {
            turns: 1,
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cached_read_tokens: u.cached_read_tokens,
            cached_write_tokens: u.cached_write_tokens,
            thought_tokens: u.thought_tokens,
            total_tokens: u.total_tokens,
            cost: u.cost.iter().cloned().collect(),
        }
    }
}

impl UsageTotals {
    /// Adds one turn's usage: [`UsageTotals::merge`] of its one-turn total,
    /// so a turn and a total are summed by one rule.
    pub fn add(&mut self, u: &TurnUsage) {
        self.merge(&UsageTotals::from(u));
    }

    /// Adds another total (turn counts, tokens, cost per currency): the
    /// one fold every total is made by.
    pub fn merge(&mut self, other: &UsageTotals) {
        self.turns += other.turns;
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cached_read_tokens += other.cached_read_tokens;
        self.cached_write_tokens += other.cached_write_tokens;
        self.thought_tokens += other.thought_tokens;
        self.total_tokens += other.total_tokens;
        for c in &other.cost {
            self.add_cost(c);
        }
    }

    fn add_cost(&mut self, c: &Cost) {
        match self.cost.iter_mut().find(|t| t.currency == c.currency) {
            Some(t) => t.amount.0 += c.amount.0,
            None => {
                self.cost.push(c.clone());
                self.cost.sort_by(|a, b| a.currency.cmp(&b.currency));
            }
        }
    }

    /// The cost in `currency` (0 when none was recorded).
    pub fn cost_in(&self, currency: &str) -> f64 {
        self.cost
            .iter()
            .find(|c| c.currency == currency)
            .map_or(0.0, |c| c.amount.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usd(a: f64) -> Cost {
        Cost {
            amount: Amount(a),
            currency: "USD".into(),
        }
    }

    /// Cumulative cost becomes per-turn cost against the session's last
    /// recorded figure; per-turn tokens are taken as they are; a restarted
    /// count or another currency counts whole.
    #[test]
    fn cumulative_cost_and_per_turn_tokens_settle_per_turn() {
        let ctx = |cost: f64| ContextUsage {
            used: 500,
            size: 1000,
            cost: Some(usd(cost)),
        };
        let tokens = TokenUsage {
            total_tokens: 30,
            input_tokens: 20,
            output_tokens: 10,
            thought_tokens: Some(4),
            cached_read_tokens: None,
            cached_write_tokens: None,
        };
        assert_eq!(TurnUsage::settle(None, None, None), None);
        let first = TurnUsage::settle(Some(&ctx(0.25)), Some(&tokens), None).unwrap();
        assert_eq!(first.cost, Some(usd(0.25)));
        assert_eq!((first.input_tokens, first.thought_tokens), (20, 4));
        assert_eq!(
            (first.context_used, first.context_size),
            (Some(500), Some(1000))
        );
        let second =
            TurnUsage::settle(Some(&ctx(0.75)), None, first.session_cost.as_ref()).unwrap();
        assert_eq!(second.cost, Some(usd(0.5)));
        assert_eq!(second.session_cost, Some(usd(0.75)));
        assert_eq!(second.total_tokens, 0);
        let restarted = TurnUsage::settle(Some(&ctx(0.1)), None, Some(&usd(0.75))).unwrap();
        assert_eq!(restarted.cost, Some(usd(0.1)));
        let eur = Cost {
            amount: Amount(2.0),
            currency: "EUR".into(),
        };
        let other = TurnUsage::settle(Some(&ctx(0.3)), None, Some(&eur)).unwrap();
        assert_eq!(other.cost, Some(usd(0.3)));

        let mut totals = UsageTotals::default();
        totals.add(&first);
        totals.add(&second);
        assert_eq!(totals.turns, 2);
        assert_eq!(totals.total_tokens, 30);
        assert_eq!(totals.cost_in("USD"), 0.75);
        assert_eq!(totals.cost_in("EUR"), 0.0);

        // A turn in another currency: one entry per currency, sorted, and
        // merging totals sums like adding their turns.
        let mut euro = second.clone();
        euro.cost = Some(eur.clone());
        let mut merged = UsageTotals::from(&euro);
        merged.merge(&totals);
        totals.add(&euro);
        assert_eq!(merged, totals);
        assert_eq!(
            totals
                .cost
                .iter()
                .map(|c| c.currency.as_str())
                .collect::<Vec<_>>(),
            ["EUR", "USD"]
        );
        assert_eq!((totals.turns, totals.cost_in("EUR")), (3, 2.0));
    }

    #[test]
    fn chunk_meta_usage_is_read_from_chunks_only_and_summed_per_call() {
        let chunk = |kind: &str, usage: serde_json::Value| {
            serde_json::json!({"sessionUpdate": kind, "content": {"type": "text", "text": ""},
                "_meta": {"usage": usage, "durationMs": 3}})
        };
        let one = serde_json::json!({"inputTokens": 100, "outputTokens": 20, "totalTokens": 120});
        let two = serde_json::json!({"inputTokens": 150, "outputTokens": 30, "totalTokens": 185,
            "thoughtTokens": 5, "cachedReadTokens": 40});
        let mut sum = TokenUsage::of_chunk(&chunk("agent_message_chunk", one.clone())).unwrap();
        sum.add(&TokenUsage::of_chunk(&chunk("agent_thought_chunk", two)).unwrap());
        assert_eq!(
            sum,
            TokenUsage {
                total_tokens: 305,
                input_tokens: 250,
                output_tokens: 50,
                thought_tokens: Some(5),
                cached_read_tokens: Some(40),
                cached_write_tokens: None,
            }
        );
        // Not a chunk, no `_meta.usage`, or not the three counts: nothing.
        assert_eq!(TokenUsage::of_chunk(&chunk("tool_call", one.clone())), None);
        let plain = serde_json::json!({"sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": "hi"}});
        assert_eq!(TokenUsage::of_chunk(&plain), None);
        let partial = serde_json::json!({"inputTokens": 1});
        assert_eq!(
            TokenUsage::of_chunk(&chunk("agent_message_chunk", partial)),
            None
        );
    }
}
