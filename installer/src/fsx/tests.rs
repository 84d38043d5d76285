//! Unit tests of the file-system safety helpers.

use super::*;

#[test]
fn write_atomic_replaces_and_leaves_no_temp() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.json");
    write_atomic(&path, b"one", 0o600).unwrap();
    write_atomic(&path, b"two", 0o644).unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"two");
    let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o644);
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn create_new_atomic_never_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.json");
    assert!(create_new_atomic(&path, b"first", 0o600, &|| {}).unwrap());
    assert!(!create_new_atomic(&path, b"second", 0o600, &|| {}).unwrap());
    assert_eq!(fs::read(&path).unwrap(), b"first");
    let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn swap_symlink_replaces_link_and_file() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("launcher");
    fs::write(&link, b"foreign").unwrap();
    swap_symlink(&link, Path::new("/a"), &|| {}).unwrap();
    assert_eq!(fs::read_link(&link).unwrap(), Path::new("/a"));
    swap_symlink(&link, Path::new("/b"), &|| {}).unwrap();
    assert_eq!(fs::read_link(&link).unwrap(), Path::new("/b"));
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn exchange_swaps_directories() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    fs::create_dir(&a).unwrap();
    fs::create_dir(&b).unwrap();
    fs::write(a.join("x"), b"a").unwrap();
    fs::write(b.join("x"), b"b").unwrap();
    exchange(&a, &b).unwrap();
    assert_eq!(fs::read(a.join("x")).unwrap(), b"b");
    assert_eq!(fs::read(b.join("x")).unwrap(), b"a");
}

#[test]
fn remove_tree_handles_read_only_dirs() {
    let dir = tempfile::tempdir().unwrap();
    let snap = dir.path().join("snap");
    fs::create_dir_all(snap.join("bin")).unwrap();
    fs::write(snap.join("bin/x"), b"x").unwrap();
    set_dir_modes(&snap, 0o555).unwrap();
    remove_tree(&snap).unwrap();
    assert!(!snap.exists());
    remove_tree(&snap).unwrap();
}

#[test]
fn batch_creates_chains_with_modes() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a/b/c");
    let b = dir.path().join("a/x");
    let c = dir.path().join("p/q");
    create_dirs_batch(&[(&a, 0o755), (&b, 0o700), (&c, 0o700)]).unwrap();
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&a), 0o755);
    assert_eq!(mode(&dir.path().join("a")), 0o755);
    assert_eq!(mode(&b), 0o700);
    assert_eq!(mode(&c), 0o700);
    assert_eq!(mode(&dir.path().join("p")), 0o700);
    create_dirs_batch(&[(&a, 0o700)]).unwrap();
    assert_eq!(mode(&a), 0o755, "existing directories keep their mode");
    let f = dir.path().join("f");
    fs::write(&f, b"x").unwrap();
    fsync_all(&[&f, &a, &b, &c, dir.path()]).unwrap();
    assert!(fsync_all(&[&f, &dir.path().join("missing")]).is_err());
}

#[test]
fn exclusive_lock_excludes_a_second_holder() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".lock");
    let held = LockGuard::acquire(&path, LockMode::Exclusive).unwrap();
    let other = File::open(&path).unwrap();
    assert!(LockGuard::try_exclusive(other, &path).unwrap().is_none());
    drop(held);
    let other = File::open(&path).unwrap();
    assert!(LockGuard::try_exclusive(other, &path).unwrap().is_some());
}
