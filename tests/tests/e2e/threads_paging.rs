//! `threads.list` pages by key (issue 44) through the real binary: `threads
//! list --limit N --after CURSOR --json` walks every page, each thread once
//! and none missed, while threads are created between pages; plain
//! `threads list` follows the pages itself; a cursor no page gave is
//! `invalid_request`.

use std::collections::BTreeSet;

use lapis_protocol::params::ThreadsList;
use serde_json::json;

use crate::acp_serve::fixture;
use crate::serve_support::Server;

#[test]
fn threads_list_pages_by_cursor_each_thread_once_across_inserts() {
    let server = Server::start_full(json!({}), json!({ "rich": fixture(&[]) }));
    let mut client = server.client("paging-e2e");
    let mut made = BTreeSet::new();
    for _ in 0..7 {
        let t = client
            .threads_create("proj", "rich", lapis_protocol::ApprovalPolicy::Ask, None)
            .unwrap();
        made.insert(t.id);
    }
    let (mut seen, mut order, mut pages) = (BTreeSet::new(), Vec::new(), 0);
    let mut after: Option<String> = None;
    loop {
        let mut args = vec!["threads", "list", "--limit", "3", "--json"];
        if let Some(a) = &after {
            args.extend(["--after", a.as_str()]);
        }
        let page = server.ctx.run(args).success().json();
        pages += 1;
        let threads = page["threads"].as_array().unwrap();
        assert!(threads.len() <= 3, "{page}");
        for t in threads {
            let id = t["id"].as_str().unwrap().to_owned();
            assert!(seen.insert(id.clone()), "{id} listed twice");
            order.push(t["createdAt"].as_str().unwrap().to_owned());
        }
        // New threads between pages are newer than the cursor: not in
        // this listing, and they do not move the threads still to come.
        client
            .threads_create("proj", "rich", lapis_protocol::ApprovalPolicy::Ask, None)
            .unwrap();
        match page["next"].as_str() {
            Some(next) => after = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(pages, 3, "7 threads in pages of 3");
    assert_eq!(seen, made, "every thread that existed, once");
    let mut newest_first = order.clone();
    newest_first.sort_by(|a, b| b.cmp(a));
    assert_eq!(order, newest_first);
    // Without --limit the CLI follows every page: the 7 and the 3 made since.
    let all = server
        .ctx
        .run(["threads", "list", "--json"])
        .success()
        .json();
    assert_eq!(all["threads"].as_array().unwrap().len(), 10, "{all}");
    assert_eq!(all["next"], serde_json::Value::Null);
    // The SDK's page call, and a cursor no page gave.
    let page = client
        .threads_list_page(&ThreadsList {
            limit: Some(4),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(page.threads.len(), 4);
    assert!(page.next.is_some());
    assert_eq!(client.threads_list().unwrap().len(), 10);
    let err = client
        .threads_list_page(&ThreadsList {
            after: Some("bogus".into()),
            ..Default::default()
        })
        .unwrap_err();
    assert_eq!(err.code(), "invalid_request");
}
