//! CPU tests of the host side: errors without a device, launch-shape arithmetic, type layouts.
use reduce_host::tuning::{self, Policy};
use reduce_host::{DeviceReduce, Error, Indexed};

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
