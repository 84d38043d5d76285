//! `backup create|list|restore`: copies of the controller database.

use clap::Subcommand;

use super::JsonArg;

#[derive(Debug, Subcommand)]
pub(crate) enum BackupCommand {
    /// Take a verified backup of the controller database now (online: the
    /// service may be running).
    Create {
        #[command(flatten)]
        out: JsonArg,
    },
    /// List the backups (manual, before each schema migration, before each
    /// restore), oldest first.
    List {
        #[command(flatten)]
        out: JsonArg,
    },
    /// Put a backup back as the controller database (serve must be
    /// stopped); the database it replaces is backed up first.
    Restore {
        /// The backup's name, as `backup list` prints it.
        name: String,
        #[command(flatten)]
        out: JsonArg,
    },
}
