//! CPU tests of the host side: errors without a device, launch-shape arithmetic, type layouts.
use reduce_host::tuning::{self, Policy};
use reduce_host::{BF16, DeviceReduce, Element, Error, F16, Indexed, OrdElement, SumElement};

#[test]
fn no_device_is_a_typed_error_not_a_panic() {
    // On a machine without a GPU (CI), creating a handle must fail cleanly; on a GPU machine it succeeds.
    match DeviceReduce::new() {
        Ok(r) => assert!(r.device_info().sm_count > 0),
        Err(Error::NoDevice(e)) => assert!(!e.message.is_empty()),
        Err(e) => panic!("expected NoDevice or success, got {e}"),
    }
}

#[test]
fn error_messages_say_what_happened() {
    let e = Error::UnsupportedDevice {
        name: "Tesla P100".into(),
        major: 6,
        minor: 0,
    };
    assert_eq!(
        e.to_string(),
        "Tesla P100 has compute capability 6.0; reduce-host needs 7.5 or newer"
    );
    let e = Error::ModuleLoad {
        arch: 90,
        source: reduce_host::DriverError {
            code: 218,
            message: "a PTX JIT compilation failed".into(),
        },
        log: "ptxas fatal: bad".into(),
    };
    assert!(e.to_string().contains("JIT log:\nptxas fatal: bad"));
}

#[test]
fn grid_is_sized_from_the_sm_count() {
    let p = Policy {
        threads: 256,
        blocks_per_sm: 8,
        finalize_threads: 256,
    };
    assert_eq!(tuning::grid_for(&p, 132, 0, 4), 1);
    assert_eq!(tuning::grid_for(&p, 132, 1, 4), 1);
    assert_eq!(
        tuning::grid_for(&p, 132, 4096, 4),
        1,
        "one trip of 256 threads × 16 floats"
    );
    assert_eq!(tuning::grid_for(&p, 132, 4097, 4), 2);
    assert_eq!(tuning::grid_for(&p, 132, 1 << 28, 4), 132 * 8);
    assert_eq!(
        tuning::grid_for(&p, 132, (1 << 32) + 5, 4),
        132 * 8,
        "no overflow past 2^32"
    );
    assert_eq!(
        tuning::grid_for(&p, 132, 4096, 8),
        2,
        "doubles: 2 per vector"
    );
}

#[test]
fn tuning_table_falls_back_by_compute_capability() {
    assert_eq!(tuning::policy(90).blocks_per_sm, 8);
    assert_eq!(tuning::policy(120), tuning::policy(90));
    assert_eq!(tuning::policy(75).blocks_per_sm, 4);
    for cc in [75, 80, 86, 90] {
        let p = tuning::policy(cc);
        assert_eq!(p.threads % 32, 0);
        assert!(p.threads <= 1024 && p.finalize_threads <= 1024);
    }
}

#[test]
fn indexed_has_the_device_layout() {
    assert_eq!(std::mem::size_of::<Indexed<f32>>(), 16);
    assert_eq!(std::mem::align_of::<Indexed<f32>>(), 8);
    assert_eq!(std::mem::offset_of!(Indexed<f32>, index), 8);
    assert_eq!(std::mem::size_of::<Indexed<f64>>(), 16);
}

#[test]
fn indexed_has_the_device_layout_for_every_element() {
    // Device: `Indexed<T> { value: T, index: u64 }`, repr(C): the value first, the index at byte 8.
    fn check<T: Element>() {
        assert_eq!(std::mem::size_of::<Indexed<T>>(), 16, "{}", T::NAME);
        assert_eq!(std::mem::align_of::<Indexed<T>>(), 8, "{}", T::NAME);
        assert_eq!(std::mem::offset_of!(Indexed<T>, value), 0, "{}", T::NAME);
        assert_eq!(std::mem::offset_of!(Indexed<T>, index), 8, "{}", T::NAME);
    }
    check::<f32>();
    check::<f64>();
    check::<F16>();
    check::<BF16>();
    check::<i32>();
    check::<u32>();
    check::<i64>();
    check::<u64>();
    check::<u8>();
    assert_eq!(std::mem::size_of::<F16>(), 2);
    assert_eq!(std::mem::align_of::<BF16>(), 2);
}

#[test]
fn every_element_names_its_kernels_and_accumulator() {
    fn check<T: SumElement + OrdElement>(name: &str, acc: &str) {
        assert_eq!(T::NAME, name);
        assert_eq!(std::any::type_name::<T::Acc>(), acc, "{name}");
        assert_eq!(
            T::SUM.partials.to_str().unwrap(),
            format!("reduce_partials_sum_{name}")
        );
        assert_eq!(
            T::SUM.atomic.unwrap().to_str().unwrap(),
            format!("reduce_atomic_sum_{name}")
        );
        assert_eq!(
            T::ARGMIN.last_block.to_str().unwrap(),
            format!("reduce_last_block_argmin_{name}")
        );
        assert!(T::MAX.atomic.is_none());
    }
    check::<f32>("f32", "f32");
    check::<f64>("f64", "f64");
    check::<F16>("f16", "f32");
    check::<BF16>("bf16", "f32");
    check::<i32>("i32", "i64");
    check::<u32>("u32", "u64");
    check::<i64>("i64", "i64");
    check::<u64>("u64", "u64");
    check::<u8>("u8", "u64");
    // 9 types × 5 operators × 3 kernels, plus 9 atomic sums, plus the histogram kernels.
    let reduction_kernels = reduce_host::all_kernels()
        .iter()
        .filter(|k| k.to_bytes().starts_with(b"reduce_"))
        .count();
    assert_eq!(reduction_kernels, 9 * 5 * 3 + 9);
}

#[test]
fn compaction_without_a_device_is_a_typed_error() {
    match reduce_host::DeviceSelect::new() {
        Ok(s) => assert!(s.device_info().sm_count > 0),
        Err(Error::NoDevice(e)) => assert!(!e.message.is_empty()),
        Err(e) => panic!("expected NoDevice or success, got {e}"),
    }
}

#[test]
fn stable_compaction_tiles_cover_the_input_from_its_aligned_start() {
    let p = Policy {
        threads: 256,
        blocks_per_sm: 8,
        finalize_threads: 256,
    };
    // A tile is 256 threads × 4 vectors × 4 floats = 4096 floats.
    assert_eq!(reduce_host::stable_tiles(&p, 0, 1, 4), 1);
    assert_eq!(reduce_host::stable_tiles(&p, 0, 4096, 4), 1);
    assert_eq!(reduce_host::stable_tiles(&p, 0, 4097, 4), 2);
    assert_eq!(
        reduce_host::stable_tiles(&p, 4, 4096, 4),
        2,
        "one float before the input's aligned start pushes the last one into a new tile"
    );
    assert_eq!(reduce_host::stable_tiles(&p, 12, 4093, 4), 1);
    assert_eq!(reduce_host::stable_tiles(&p, 0, 1 << 40, 4), 1 << 28);
}
