//! Reads back the one labelled context block the controller puts before a
//! prompt's text (`service/src/acp/prompt.rs`), as the agents of this
//! suite record it: with its newlines, or (the fixture agent's ledger)
//! with each newline made a space.

/// The `(source URI, text)` of each block inside a context envelope whose
/// tag is `lapis-context`, in order; empty when `sent` is no envelope.
pub fn context_blocks(sent: &str) -> Vec<(String, String)> {
    let open = "<lapis-context-block source=\"";
    let close = "</lapis-context-block>";
    if !sent.starts_with("<lapis-context>") {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut rest = sent;
    while let Some(at) = rest.find(open) {
        rest = &rest[at + open.len()..];
        let Some((uri, after)) = rest.split_once("\">") else {
            break;
        };
        let Some(end) = after.find(close) else {
            break;
        };
        // One newline (or its space) after the opening tag and before the
        // closing one belongs to the envelope.
        let text = &after[..end];
        let text = text.strip_prefix(['\n', ' ']).unwrap_or(text);
        let text = text.strip_suffix(['\n', ' ']).unwrap_or(text);
        out.push((uri.to_owned(), text.to_owned()));
        rest = &after[end + close.len()..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::context_blocks;

    #[test]
    fn reads_both_forms() {
        let sent = "<lapis-context>\nContext.\n<lapis-context-block source=\"lapis://a\">\none\ntwo\n\
            </lapis-context-block>\n<lapis-context-block source=\"lapis://b\">\nb\n\
            </lapis-context-block>\n</lapis-context>\n\n";
        let want = vec![
            ("lapis://a".to_owned(), "one\ntwo".to_owned()),
            ("lapis://b".to_owned(), "b".to_owned()),
        ];
        assert_eq!(context_blocks(sent), want);
        let spaced = sent.replace('\n', " ");
        assert_eq!(
            context_blocks(&spaced),
            vec![
                ("lapis://a".to_owned(), "one two".to_owned()),
                ("lapis://b".to_owned(), "b".to_owned()),
            ]
        );
        assert!(context_blocks("plain text").is_empty());
    }
}
