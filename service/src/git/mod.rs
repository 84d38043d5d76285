//! Git, through the `git` CLI: workspace snapshots as tree ids and the
//! diffs between them ([`snapshot`]), and worktree workspaces
//! ([`worktree`]).
//!
//! Why the CLI and not a library: measured on a 50k-file repository on the
//! build machine, `git add -A && git write-tree` with a private index that
//! persists between snapshots costs about as much as listing the tree
//! (`find` alone took 80-190 ms there, `git status` 270-390 ms, the
//! snapshot 170-230 ms), so a library has little to win, while `gix` would
//! add a large dependency tree whose worktree-to-index staging is not a
//! finished high-level API, and `git2` a C build of libgit2. Every machine
//! with a repository has `git`; one that has none records `git_missing`.
//! A snapshot of a tree that has not changed since the previous one runs
//! no git at all (`snapshot/seen.rs`): it costs one `fstatat` per file,
//! measured at 0.73x `git status` on the same 50k-file tree.
//!
//! What must stay true: nothing here writes the user's index, HEAD,
//! branches, refs, stash or object store. Every command runs with a private
//! `GIT_INDEX_FILE` and a private `GIT_OBJECT_DIRECTORY` under the
//! controller home (the repository's objects are read as an alternate),
//! and every command is bounded by a timeout that kills it.

mod command;
pub mod snapshot;
pub(crate) mod worktree;
pub(crate) mod worktree_hook;
