//! The *Examples* section of every command's help, as one table: a command
//! path (`"turns submit"`) and the invocations shown for it, each a comment
//! saying what it does and the command line. Declarative on purpose, so the
//! examples read together and a unit test can check that every visible
//! command has some and every entry names a real command.
//!
//! What must stay true: every example is a real invocation of the current
//! command tree (the unit test parses each one with the real parser), and
//! ids in them are the shapes the service prints (`thr_…`, `turn_…` or a
//! prefix of one).

//!
//! The table is kept in two files by subject: [`machine`] (installing,
//! the service, tokens, providers, configuration) and [`work`] (workspaces,
//! threads, turns, the journal, backups, permissions, budgets, `watch`,
//! `ask`); [`examples`] reads them as one, in help order.

mod machine;
mod work;

/// `(command path, [(what it does, command line without the binary name)])`.
pub(super) type Entry = (&'static str, &'static [(&'static str, &'static str)]);

/// Every entry of the table.
pub(super) fn examples() -> impl Iterator<Item = &'static Entry> {
    machine::MACHINE
        .iter()
        .chain(work::WORK)
        .chain(machine::SETUP)
}
