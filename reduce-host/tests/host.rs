//! CPU tests of the host side: errors without a device, launch-shape arithmetic, type layouts.
use reduce_host::{BF16, DeviceReduce, Element, Error, F16, Indexed, SumElement};

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
    assert!(
        e.to_string()
            .starts_with("Tesla P100 has compute capability 6.0;")
    );
    assert!(e.to_string().contains("it needs 7.5 or newer"));
    let e = Error::ModuleLoad {
        module: "reduce_sum_f32".into(),
        code: reduce_host::Code::Ptx { arch: 90 },
        message: "a PTX JIT compilation failed\nptxas fatal: bad".into(),
    };
    assert!(e.to_string().contains("reduce_sum_f32 (Ptx { arch: 90 })"));
    assert!(e.to_string().contains("ptxas fatal: bad"));
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
        let name = std::any::type_name::<T>();
        assert_eq!(std::mem::size_of::<Indexed<T>>(), 16, "{name}");
        assert_eq!(std::mem::align_of::<Indexed<T>>(), 8, "{name}");
        assert_eq!(std::mem::offset_of!(Indexed<T>, value), 0, "{name}");
        assert_eq!(std::mem::offset_of!(Indexed<T>, index), 8, "{name}");
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
    use reduce_contract::kernels::{Family, ReducePass, Reduction, SumAtomic};
    use reduce_contract::{Kernel, Op};
    fn check<T: SumElement>(name: &str, acc: &str) {
        assert_eq!(std::any::type_name::<T::Acc>(), acc, "{name}");
        let kernel = |op, pass| {
            Reduction { op, elem: T::ELEM }
                .kernel(pass)
                .name()
                .to_string()
        };
        assert_eq!(
            kernel(Op::Sum, ReducePass::Partials),
            format!("reduce_partials_sum_{name}")
        );
        assert_eq!(
            SumAtomic(T::ELEM).name().to_string(),
            format!("reduce_atomic_sum_{name}")
        );
        assert_eq!(
            kernel(Op::ArgMin, ReducePass::LastBlock),
            format!("reduce_last_block_argmin_{name}")
        );
        assert_eq!(
            reduce_contract::Module::Reduce(Op::Max, T::ELEM).kernel_count(),
            3,
            "no atomic max"
        );
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
    // 9 types × 5 operators × 3 kernels, plus 9 atomic sums.
    let reduction_kernels: usize = reduce_contract::Module::all()
        .filter(|m| matches!(m, reduce_contract::Module::Reduce(..)))
        .map(|m| m.kernel_count())
        .sum();
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
fn handles_can_move_between_threads() {
    fn send<T: Send>() {}
    send::<reduce_host::DeviceReduce>();
    send::<reduce_host::DeviceSelect>();
    send::<reduce_host::DeviceHistogram>();
    send::<reduce_host::Gpu>();
}

#[test]
fn sticky_driver_errors_say_the_context_is_lost() {
    let e = |code| reduce_host::DriverError {
        code,
        message: "m".into(),
    };
    assert!(matches!(Error::from(e(700)), Error::ContextLost(_)));
    assert!(matches!(Error::from(e(719)), Error::ContextLost(_)));
    assert!(matches!(Error::from(e(1)), Error::Driver(_)));
    assert!(
        Error::from(e(700))
            .to_string()
            .contains("restart the process")
    );
}
