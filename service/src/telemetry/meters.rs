//! The metric instruments the journal feeds ([`super::spans`]), and what a
//! turn's usage adds to them and to its span.
//!
//! What must stay true: attributes are closed vocabularies or the thread's
//! provider; a currency is exported only as an ISO 4217 shape (three
//! ASCII capitals), anything else an agent sent becomes `unknown`.

use lapis_protocol::usage::TurnUsage;
use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram, MeterProvider, UpDownCounter};
use opentelemetry_sdk::metrics::SdkMeterProvider;

/// The instruments, built once.
pub(super) struct Instruments {
    pub(super) turns: Counter<u64>,
    pub(super) turn_seconds: Histogram<f64>,
    pub(super) queue_seconds: Histogram<f64>,
    pub(super) queued: UpDownCounter<i64>,
    pub(super) fences: Counter<u64>,
    pub(super) permissions_pending: UpDownCounter<i64>,
    pub(super) permission_seconds: Histogram<f64>,
    pub(super) tool_calls: Counter<u64>,
    /// Tokens by provider and kind (`input`, `output`, …).
    tokens: Counter<u64>,
    /// Cost by provider and currency.
    cost: Counter<f64>,
}

impl Instruments {
    pub(super) fn new(meters: &SdkMeterProvider) -> Instruments {
        let m = meters.meter("lapis-ai-controller");
        Instruments {
            turns: m
                .u64_counter("lapis.turns")
                .with_description("Turns ended, by outcome")
                .build(),
            turn_seconds: m
                .f64_histogram("lapis.turn.duration")
                .with_unit("s")
                .with_description("Claim to outcome")
                .build(),
            queue_seconds: m
                .f64_histogram("lapis.turn.queue_duration")
                .with_unit("s")
                .with_description("Submit to claim")
                .build(),
            queued: m
                .i64_up_down_counter("lapis.turns.queued")
                .with_description("Turns waiting for their workspace")
                .build(),
            fences: m
                .u64_counter("lapis.fences")
                .with_description("Workspaces fenced by a turn of unknown outcome")
                .build(),
            permissions_pending: m
                .i64_up_down_counter("lapis.permissions.pending")
                .with_description("Permission requests waiting for an answer")
                .build(),
            permission_seconds: m
                .f64_histogram("lapis.permission.wait")
                .with_unit("s")
                .with_description("Request to decision")
                .build(),
            tool_calls: m
                .u64_counter("lapis.tool_calls")
                .with_description("Application tool calls, by outcome")
                .build(),
            tokens: m
                .u64_counter("lapis.tokens")
                .with_unit("{token}")
                .with_description("Tokens the agents reported, by provider and kind")
                .build(),
            cost: m
                .f64_counter("lapis.cost")
                .with_description("Cost the agents reported, by provider and currency")
                .build(),
        }
    }

    /// Counts a turn's usage and returns its span attributes.
    pub(super) fn usage(&self, provider: &str, usage: &TurnUsage) -> Vec<KeyValue> {
        let kinds = [
            ("input", usage.input_tokens),
            ("output", usage.output_tokens),
            ("cached_read", usage.cached_read_tokens),
            ("cached_write", usage.cached_write_tokens),
            ("thought", usage.thought_tokens),
        ];
        let mut attrs = Vec::with_capacity(10);
        for (kind, n) in kinds {
            if n > 0 {
                self.tokens.add(
                    n,
                    &[
                        KeyValue::new("lapis.provider", provider.to_owned()),
                        KeyValue::new("lapis.token.kind", kind),
                    ],
                );
            }
            attrs.push(KeyValue::new(
                format!("lapis.usage.{kind}_tokens"),
                n as i64,
            ));
        }
        attrs.push(KeyValue::new(
            "lapis.usage.total_tokens",
            usage.total_tokens as i64,
        ));
        if let Some(used) = usage.context_used {
            attrs.push(KeyValue::new("lapis.usage.context_used", used as i64));
        }
        if let Some(size) = usage.context_size {
            attrs.push(KeyValue::new("lapis.usage.context_size", size as i64));
        }
        if let Some(cost) = &usage.cost {
            let currency = currency(&cost.currency);
            self.cost.add(
                cost.amount.0,
                &[
                    KeyValue::new("lapis.provider", provider.to_owned()),
                    KeyValue::new("lapis.cost.currency", currency.clone()),
                ],
            );
            attrs.push(KeyValue::new("lapis.cost.amount", cost.amount.0));
            attrs.push(KeyValue::new("lapis.cost.currency", currency));
        }
        attrs
    }
}

/// An ISO 4217 code as sent, or `unknown`.
fn currency(code: &str) -> String {
    if code.len() == 3 && code.bytes().all(|b| b.is_ascii_uppercase()) {
        code.to_owned()
    } else {
        "unknown".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::currency;

    #[test]
    fn only_an_iso_shaped_currency_is_exported() {
        assert_eq!(currency("USD"), "USD");
        for bad in ["usd", "US", "USDX", "€", "PROMPT-SECRET", ""] {
            assert_eq!(currency(bad), "unknown", "{bad}");
        }
    }
}
