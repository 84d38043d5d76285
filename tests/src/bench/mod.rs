//! The `bench` runner's suites (see `src/bin/bench.rs`) and the serve rig
//! the chaos runner shares.

pub mod acpx;
pub mod install;
pub mod journal;
pub mod memory;
pub mod rig;
pub mod startup;
pub mod status;
pub mod table;
pub mod turns;
pub mod warm;
