//! `threads list`'s arguments: every page, or one (`--limit`, `--after`).

use clap::Args;

use super::ListArgs;

#[derive(Debug, Args)]
pub(crate) struct ThreadsListArgs {
    #[command(flatten)]
    pub(crate) list: ListArgs,
    /// One page of at most N threads (1-1000) instead of every page; the
    /// next page's cursor goes to stderr (`next` in --json, null after the
    /// last page)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub(crate) limit: Option<u16>,
    /// One page: the one after CURSOR (the `next` a page gave)
    #[arg(long, value_name = "CURSOR")]
    pub(crate) after: Option<String>,
}
