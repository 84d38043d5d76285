//! The content blocks of one `session/prompt`: context first, the user's
//! text last.
//!
//! What must stay true: every block of context (a continuation's digest of
//! its prior turn, then the blocks of the thread's context port, in the
//! port's order) comes before the prompt text; each is an embedded
//! resource (`{"type":"resource","resource":{uri,mimeType,text}}`) when
//! the agent advertised `promptCapabilities.embeddedContext` in
//! `initialize`, else a plain text block (ACP requires every agent to take
//! text). The prompt text itself is always the last block, as text.

use serde_json::{Value, json};

/// One block of context, as the agent will read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptContext {
    /// Where it comes from (`lapis://continuation/<turn>`,
    /// `lapis://context/<port>/<block>`).
    pub uri: String,
    /// Its text.
    pub text: String,
}

/// The prompt's blocks: `context` in order, then `prompt`.
pub(crate) fn blocks(prompt: &str, context: &[&PromptContext], embedded: bool) -> Vec<Value> {
    let mut out: Vec<Value> = context
        .iter()
        .map(|c| {
            if embedded {
                json!({"type": "resource", "resource": {
                    "uri": c.uri, "mimeType": "text/plain", "text": c.text}})
            } else {
                json!({"type": "text", "text": c.text})
            }
        })
        .collect();
    out.push(json!({"type": "text", "text": prompt}));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_comes_first_embedded_only_when_the_agent_takes_it() {
        let a = PromptContext {
            uri: "lapis://continuation/turn_1".into(),
            text: "before".into(),
        };
        let b = PromptContext {
            uri: "lapis://context/crm/notes".into(),
            text: "notes".into(),
        };
        let embedded = blocks("do it", &[&a, &b], true);
        assert_eq!(embedded.len(), 3);
        assert_eq!(embedded[0]["type"], "resource");
        assert_eq!(
            embedded[0]["resource"]["uri"],
            "lapis://continuation/turn_1"
        );
        assert_eq!(embedded[1]["resource"]["text"], "notes");
        assert_eq!(embedded[2], json!({"type": "text", "text": "do it"}));
        let plain = blocks("do it", &[&a, &b], false);
        assert_eq!(plain[0], json!({"type": "text", "text": "before"}));
        assert_eq!(plain[1], json!({"type": "text", "text": "notes"}));
        assert_eq!(plain[2]["text"], "do it");
        assert_eq!(
            blocks("only", &[], true),
            vec![json!({"type": "text", "text": "only"})]
        );
    }
}
