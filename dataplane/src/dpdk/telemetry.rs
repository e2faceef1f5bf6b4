//! DPDK telemetry commands answered by raceway (`/raceway/*`): registration, and the
//! callback that turns a handler's reply into DPDK's dict or string.
//!
//! Invariant: one handler per process, set once; a reply never exceeds what DPDK takes
//! (`TELEMETRY_TEXT_MAX` for text).

#![allow(unsafe_code)]

use super::{check, DpdkError};
use dpdk_sys as sys;
use std::ffi::{c_char, c_int, CStr, CString};

/// A telemetry reply. DPDK renders it as JSON.
pub enum TelemetryReply {
    /// Named sections (ports, groups), each a dict of counters: one object of objects.
    Sections(Vec<(String, Vec<(String, u64)>)>),
    /// One string of at most `TELEMETRY_TEXT_MAX` bytes, of characters JSON needs no escape
    /// for (DPDK 22.11 writes it as it is).
    Text(String),
}

/// The longest string reply DPDK takes (RTE_TEL_MAX_SINGLE_STRING_LEN, with its NUL).
pub const TELEMETRY_TEXT_MAX: usize = 8191;
/// Answers a registered telemetry command (command, parameters), or `None` for an unknown one.
pub type TelemetryHandler = Box<dyn Fn(&str, &str) -> Option<TelemetryReply> + Send + Sync>;

static TELEMETRY_HANDLER: std::sync::OnceLock<TelemetryHandler> = std::sync::OnceLock::new();

/// A telemetry dict key: DPDK accepts only ASCII letters, digits, '_' and '/'.
fn telemetry_name(name: &str) -> CString {
    let clean: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '/' { c } else { '_' }).collect();
    CString::new(clean).expect("no NUL after cleaning")
}

/// The C callback of every raceway telemetry command: runs on DPDK's telemetry thread, asks
/// the handler, and fills the reply. A panic in the handler is caught (it must not unwind
/// into C) and answered with -EIO.
extern "C" fn telemetry_callback(cmd: *const c_char, params: *const c_char, data: *mut sys::rte_tel_data) -> c_int {
    let Some(handler) = TELEMETRY_HANDLER.get() else { return -libc::ENOENT };
    let text = |ptr: *const c_char| {
        if ptr.is_null() {
            String::new()
        } else {
            // SAFETY: DPDK passes NUL-terminated strings valid for the call.
            unsafe { CStr::from_ptr(ptr) }.to_string_lossy().into_owned()
        }
    };
    let (cmd, params) = (text(cmd), text(params));
    let reply = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handler(&cmd, &params))) {
        Ok(Some(reply)) => reply,
        Ok(None) => return -libc::EINVAL,
        Err(_) => return -libc::EIO,
    };
    let reply = match reply {
        TelemetryReply::Text(text) => {
            let Ok(text) = CString::new(text) else { return -libc::EINVAL };
            if text.as_bytes().len() > TELEMETRY_TEXT_MAX {
                return -libc::E2BIG;
            }
            // SAFETY: `data` is the reply object DPDK passed for this call; DPDK copies the
            // string, which is NUL-terminated and within its limit.
            return unsafe { sys::rte_tel_data_string(data, text.as_ptr()) };
        }
        TelemetryReply::Sections(sections) => sections,
    };
    // SAFETY: `data` is the reply object DPDK passed for this call.
    unsafe { sys::rte_tel_data_start_dict(data) };
    for (section, values) in reply {
        // SAFETY: a plain allocation; checked for NULL below.
        let child = unsafe { sys::rte_tel_data_alloc() };
        if child.is_null() {
            return -libc::ENOMEM;
        }
        // SAFETY: `child` is a fresh telemetry object we own until it is added below.
        unsafe { sys::rte_tel_data_start_dict(child) };
        for (name, value) in values {
            let name = telemetry_name(&name);
            // SAFETY: `child` is a started dict; the name outlives the call (DPDK copies it).
            unsafe { sys::rte_tel_data_add_dict_u64(child, name.as_ptr(), value) };
        }
        let section = telemetry_name(&section);
        // SAFETY: `data` is a started dict; keep = 0 hands `child` to DPDK, which frees it
        // once the reply is written.
        unsafe { sys::rte_tel_data_add_dict_container(data, section.as_ptr(), child, 0) };
    }
    0
}

/// Registers `commands` (name, help) with DPDK telemetry, all answered by `handler`, so that
/// `dpdk-telemetry.py` can query them. Once per process, after the EAL is up.
pub fn register_telemetry(
    commands: &[(&'static CStr, &'static CStr)],
    handler: TelemetryHandler,
) -> Result<(), DpdkError> {
    if TELEMETRY_HANDLER.set(handler).is_err() {
        return Err(DpdkError { context: "telemetry".into(), problem: "commands are already registered".into() });
    }
    for (command, help) in commands {
        // SAFETY: static NUL-terminated strings; the callback is a plain extern "C" fn.
        let rc = unsafe { sys::rte_telemetry_register_cmd(command.as_ptr(), Some(telemetry_callback), help.as_ptr()) };
        check(rc, || format!("telemetry command {}", command.to_string_lossy()))?;
    }
    Ok(())
}
