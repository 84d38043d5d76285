use super::controller::human;

#[test]
fn sizes_read_naturally() {
    assert_eq!(human(5 << 30), "5.0 GiB");
    assert_eq!(human(1536 << 20), "1.5 GiB");
    assert_eq!(human(100 << 20), "100.0 MiB");
}
