use super::*;

fn opts() -> PathOptions {
    PathOptions {
        home: "/home/u".into(),
        cwd: "/work/dir".into(),
        service_kind: Some(ServiceKind::Systemd),
        ..PathOptions::default()
    }
}

#[test]
fn default_instance_paths() {
    let p = Paths::resolve(&opts()).unwrap();
    assert_eq!(
        p.launcher,
        Path::new("/home/u/.local/bin/lapis-ai-controller")
    );
    assert_eq!(
        p.releases_root,
        Path::new("/home/u/.local/lib/lapis-ai-controller/releases")
    );
    assert_eq!(
        p.config,
        Path::new("/home/u/.config/lapis-ai-controller/config.json")
    );
    assert_eq!(p.controller_home, Path::new("/home/u/.lapis/ai-controller"));
    assert_eq!(p.unit.name, "lapis-ai-controller.service");
    assert_eq!(
        p.unit.path,
        Path::new("/home/u/.config/systemd/user/lapis-ai-controller.service")
    );
    assert_eq!(p.instance, Instance::Default);
}

#[test]
fn named_instance_and_overrides() {
    let mut o = opts();
    o.instance = Some("work-2".into());
    o.xdg_config_home = Some("/x/cfg".into());
    o.install_path = Some("bin/../launcher".into());
    o.config = Some("./c.json".into());
    let p = Paths::resolve(&o).unwrap();
    assert_eq!(p.launcher, Path::new("/work/dir/launcher"));
    assert_eq!(p.config, Path::new("/work/dir/c.json"));
    assert!(p.config_explicit);
    assert_eq!(
        p.controller_home,
        Path::new("/home/u/.lapis/ai-controller-work-2")
    );
    assert_eq!(p.unit.name, "lapis-ai-controller-work-2.service");
    assert_eq!(
        p.unit.path,
        Path::new("/x/cfg/systemd/user/lapis-ai-controller-work-2.service")
    );
    o.config = None;
    let p = Paths::resolve(&o).unwrap();
    assert_eq!(
        p.config,
        Path::new("/x/cfg/lapis-ai-controller/instances/work-2/config.json")
    );
}

#[test]
fn relative_xdg_config_home_is_ignored() {
    let mut o = opts();
    o.xdg_config_home = Some("rel".into());
    let p = Paths::resolve(&o).unwrap();
    assert!(p.config.starts_with("/home/u/.config"));
}

#[test]
fn launchd_label_and_plist() {
    let mut o = opts();
    o.service_kind = Some(ServiceKind::Launchd);
    o.instance = Some("a".into());
    let p = Paths::resolve(&o).unwrap();
    assert_eq!(p.unit.name, "ai.lapis.controller.a");
    assert_eq!(
        p.unit.path,
        Path::new("/home/u/Library/LaunchAgents/ai.lapis.controller.a.plist")
    );
}

#[test]
fn instance_names_are_validated() {
    for ok in ["a", "0", "work-2", &"a".repeat(32)] {
        assert!(Instance::parse(Some(ok)).is_ok(), "{ok}");
    }
    assert_eq!(Instance::parse(Some("default")).unwrap(), Instance::Default);
    for bad in [
        "",
        "-a",
        "A",
        "a_b",
        "a/b",
        "..",
        "a b",
        &"a".repeat(33),
        "é",
    ] {
        let err = Instance::parse(Some(bad)).unwrap_err().to_string();
        assert!(err.contains("invalid instance name"), "{bad}: {err}");
    }
}

#[test]
fn relative_home_is_refused() {
    let mut o = opts();
    o.home = "home".into();
    assert!(matches!(
        Paths::resolve(&o),
        Err(PathError::RelativeHome(_))
    ));
}

proptest::proptest! {
    /// `Instance::parse` accepts exactly `^[a-z0-9][a-z0-9-]{0,31}$`
    /// (and `default`), checked against an independent oracle.
    #[test]
    fn instance_names_match_the_pattern(name in "[a-z0-9_A-Z./ -]{0,34}") {
        let chars: Vec<char> = name.chars().collect();
        let oracle = (1..=32).contains(&chars.len())
            && (chars[0].is_ascii_lowercase() || chars[0].is_ascii_digit())
            && chars.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-');
        let parsed = Instance::parse(Some(&name));
        proptest::prop_assert_eq!(parsed.is_ok(), oracle || name == "default");
        if let Ok(Instance::Named(n)) = parsed {
            // A valid name never escapes its directory.
            let p = Paths::resolve(&PathOptions { instance: Some(n.clone()), ..opts() }).unwrap();
            proptest::prop_assert!(p.config.starts_with("/home/u/.config/lapis-ai-controller/instances"));
            proptest::prop_assert_eq!(p.config.parent().unwrap().file_name().unwrap().to_str(), Some(n.as_str()));
        }
    }
}

#[test]
fn digest_names() {
    assert!(is_digest(&"a".repeat(64)));
    assert!(!is_digest(&"A".repeat(64)));
    assert!(!is_digest(".staging-abc"));
}
