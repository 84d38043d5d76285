//! The `bench` runner's suites (see `src/bin/bench.rs`) and the serve rig
//! the chaos runner shares.

pub(crate) mod acpx;
pub(crate) mod context;
pub(crate) mod evidence;
pub(crate) mod install;
pub(crate) mod journal;
pub(crate) mod memory;
pub(crate) mod rig;
pub(crate) mod scale;
pub(crate) mod scale_seed;
pub(crate) mod startup;
pub(crate) mod status;
pub(crate) mod table;
pub(crate) mod tools;
pub(crate) mod turns;
pub(crate) mod warm;
pub(crate) mod watch;
