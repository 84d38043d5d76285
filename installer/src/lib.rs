//! `lapis-installer`: puts a verified release tree into an immutable,
//! digest-addressed snapshot and moves the launcher to it atomically.
