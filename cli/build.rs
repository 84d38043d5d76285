//! Passes the build identity into the binary at compile time.
//!
//! Only environment variables set by whoever runs the build are read; nothing
//! here runs git or looks at the checkout. `LAPIS_BUILD_COMMIT` and
//! `SOURCE_DATE_EPOCH` are optional; without them the binary reports `dev`.

fn main() {
    println!("cargo:rerun-if-env-changed=LAPIS_BUILD_COMMIT");
    println!("cargo:rerun-if-env-changed=LAPIS_BUILD_VERSION");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    let target = std::env::var("TARGET").expect("cargo sets TARGET for build scripts");
    println!("cargo:rustc-env=LAPIS_BUILD_TARGET={target}");
    // The date is rendered at run time by `lapis_release::date_from_epoch`
    // (one implementation); here the value is only validated.
    if let Ok(epoch) = std::env::var("SOURCE_DATE_EPOCH") {
        let secs: i64 = epoch
            .trim()
            .parse()
            .expect("SOURCE_DATE_EPOCH must be an integer number of seconds");
        println!("cargo:rustc-env=LAPIS_BUILD_EPOCH={secs}");
    }
}
