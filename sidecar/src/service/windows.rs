//! The Windows side of `sidecar service`: registering, starting, stopping and removing the
//! service in the service manager, and serving as one (`service run`) until it is stopped.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use windows_service::service::{
    ServiceAccess, ServiceControl, ServiceControlAccept, ServiceErrorControl, ServiceExitCode,
    ServiceInfo, ServiceStartType, ServiceState, ServiceStatus, ServiceType,
};
use windows_service::service_control_handler::{self, ServiceControlHandlerResult};
use windows_service::service_manager::{ServiceManager, ServiceManagerAccess};
use windows_service::{define_windows_service, service_dispatcher};

use super::action::{Action, SERVICE_NAME};

/// The config of the service being run (the service manager calls back without it).
static CONFIG: OnceLock<PathBuf> = OnceLock::new();

/// Win32's ERROR_SERVICE_ALREADY_RUNNING.
const ERROR_SERVICE_ALREADY_RUNNING: i32 = 1056;

/// Longest wait for the service to stop, at uninstall.
const STOP_WAIT: Duration = Duration::from_secs(30);
/// Longest wait for the service to say it runs, at start.
const START_WAIT: Duration = Duration::from_secs(30);
/// What the service's log says when it could not start.
const START_FAILED: &str = "the sidecar service could not start: ";

pub fn run(action: Action) -> Result<String, String> {
    let e = |what: &'static str| {
        move |err: windows_service::Error| match std::error::Error::source(&err) {
            Some(cause) => format!("{what}: {err}: {cause}"),
            None => format!("{what}: {err}"),
        }
    };
    let access = ServiceManagerAccess::CONNECT | ServiceManagerAccess::CREATE_SERVICE;
    let manager =
        || ServiceManager::local_computer(None::<&str>, access).map_err(e("the service manager"));
    match action {
        Action::Install(config) => {
            let config = std::fs::canonicalize(&config)
                .map_err(|err| format!("{}: {err}", config.display()))?;
            crate::SidecarConfig::load(&config)
                .map_err(|err| format!("{}: {err}", config.display()))?;
            let exe =
                std::env::current_exe().map_err(|err| format!("this program's path: {err}"))?;
            let info = ServiceInfo {
                name: SERVICE_NAME.into(),
                display_name: "sqltunnel sidecar".into(),
                service_type: ServiceType::OWN_PROCESS,
                start_type: ServiceStartType::AutoStart,
                error_control: ServiceErrorControl::Normal,
                executable_path: exe,
                launch_arguments: ["service", "run", "--config"]
                    .map(OsString::from)
                    .into_iter()
                    .chain([config.clone().into_os_string()])
                    .collect(),
                dependencies: Vec::new(),
                account_name: None,
                account_password: None,
            };
            let service = manager()?
                .create_service(&info, ServiceAccess::CHANGE_CONFIG)
                .map_err(e("installing"))?;
            drop(service.set_description(
                "A local MySQL endpoint tunnelled over HTTP to a sqltunnel transport",
            ));
            Ok(format!(
                "installed {SERVICE_NAME} with {}; start it: sidecar service start",
                config.display()
            ))
        }
        Action::Uninstall => {
            let service = manager()?
                .open_service(
                    SERVICE_NAME,
                    ServiceAccess::QUERY_STATUS | ServiceAccess::STOP | ServiceAccess::DELETE,
                )
                .map_err(e("opening the service"))?;
            if service.query_status().map_err(e("its status"))?.current_state
                != ServiceState::Stopped
            {
                drop(service.stop());
                let started = std::time::Instant::now();
                while service.query_status().is_ok_and(|s| s.current_state != ServiceState::Stopped)
                    && started.elapsed() < STOP_WAIT
                {
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
            service.delete().map_err(e("removing"))?;
            Ok(format!("removed {SERVICE_NAME}"))
        }
        Action::Start => {
            let access =
                ServiceAccess::START | ServiceAccess::QUERY_STATUS | ServiceAccess::QUERY_CONFIG;
            let service =
                manager()?.open_service(SERVICE_NAME, access).map_err(e("opening the service"))?;
            match service.start::<&str>(&[]) {
                Ok(()) => {}
                // Started already (at boot: it starts automatically).
                Err(windows_service::Error::Winapi(err))
                    if err.raw_os_error() == Some(ERROR_SERVICE_ALREADY_RUNNING) =>
                {
                    return Ok(format!("{SERVICE_NAME} is running already"));
                }
                Err(err) => return Err(e("starting")(err)),
            }
            // It says Running once its config loaded and its port is open; Stopped if not.
            let started = std::time::Instant::now();
            loop {
                let state = service.query_status().map_err(e("its status"))?.current_state;
                match state {
                    ServiceState::Running => return Ok(format!("started {SERVICE_NAME}")),
                    ServiceState::Stopped => {
                        let log = service
                            .query_config()
                            .ok()
                            .and_then(|c| config_of(&c.executable_path.to_string_lossy()))
                            .map(|config| config.with_file_name("sidecar.log"));
                        let why = log.as_deref().and_then(last_failure).unwrap_or_default();
                        let at =
                            log.map_or_else(String::new, |l| format!(" (see {})", l.display()));
                        return Err(format!("{SERVICE_NAME} did not start: {why}{at}"));
                    }
                    _ if started.elapsed() > START_WAIT => {
                        return Ok(format!(
                            "{SERVICE_NAME} is starting (still, after {} s)",
                            START_WAIT.as_secs()
                        ));
                    }
                    _ => std::thread::sleep(Duration::from_millis(100)),
                }
            }
        }
        Action::Stop => {
            let service = manager()?
                .open_service(SERVICE_NAME, ServiceAccess::STOP)
                .map_err(e("opening the service"))?;
            service.stop().map_err(e("stopping"))?;
            Ok(format!("stopping {SERVICE_NAME} (running commands get their grace)"))
        }
        Action::Run(config) => {
            drop(CONFIG.set(config));
            service_dispatcher::start(SERVICE_NAME, ffi_service_main)
                .map_err(e("running as a service"))?;
            Ok(String::new())
        }
    }
}

define_windows_service!(ffi_service_main, service_main);

/// Called by the service manager on its own thread: serves until Stop or Shutdown.
fn service_main(_: Vec<OsString>) {
    let stop = CancellationToken::new();
    let on_stop = stop.clone();
    let handler = move |control| match control {
        ServiceControl::Stop | ServiceControl::Shutdown => {
            on_stop.cancel();
            ServiceControlHandlerResult::NoError
        }
        ServiceControl::Interrogate => ServiceControlHandlerResult::NoError,
        _ => ServiceControlHandlerResult::NotImplemented,
    };
    let Ok(status) = service_control_handler::register(SERVICE_NAME, handler) else { return };
    let report = |state, accept, code| {
        drop(status.set_service_status(ServiceStatus {
            service_type: ServiceType::OWN_PROCESS,
            current_state: state,
            controls_accepted: accept,
            exit_code: ServiceExitCode::Win32(code),
            checkpoint: 0,
            wait_hint: Duration::from_secs(40),
            process_id: None,
        }));
    };
    report(ServiceState::StartPending, ServiceControlAccept::empty(), 0);
    let Some(path) = CONFIG.get() else {
        return report(ServiceState::Stopped, ServiceControlAccept::empty(), 1);
    };
    let running = || {
        report(
            ServiceState::Running,
            ServiceControlAccept::STOP | ServiceControlAccept::SHUTDOWN,
            0,
        );
    };
    let served = serve(path, stop, running);
    if let Err(why) = &served {
        // Also where no log was set up yet (a config that did not load): beside the config.
        tracing::error!("{START_FAILED}{why}");
        note_failure(&path.with_file_name("sidecar.log"), why);
    }
    report(ServiceState::Stopped, ServiceControlAccept::empty(), u32::from(served.is_err()));
}

/// The sidecar, as `sidecar --config PATH` runs it, logging to `log.file` (by default
/// `sidecar.log` beside the config), until `stop`; `running` once it listens.
fn serve(path: &Path, stop: CancellationToken, running: impl FnOnce()) -> Result<(), String> {
    let mut config = crate::SidecarConfig::load(path).map_err(|e| e.to_string())?;
    if config.log.file.is_none() {
        config.log.file = Some(path.with_file_name("sidecar.log"));
    }
    drop(common::telemetry::init(&config.log));
    let runtime = common::runtime::build().map_err(|e| e.to_string())?;
    runtime.block_on(async move {
        let addr = config.listen;
        let listener =
            common::runtime::bind(addr).map_err(|e| format!("cannot listen on {addr}: {e}"))?;
        running();
        crate::run(listener, config, stop).await.map_err(|e| e.to_string())
    })
}

/// Appends why the service could not start to `log` (a config that did not load has set up
/// no log of its own), unless the log has that line already.
fn note_failure(log: &Path, why: &str) {
    use std::io::Write;
    let line = format!("{START_FAILED}{why}");
    if std::fs::read_to_string(log).is_ok_and(|text| text.contains(&line)) {
        return;
    }
    let file = std::fs::OpenOptions::new().create(true).append(true).open(log);
    if let Ok(mut file) = file {
        drop(writeln!(file, "{line}"));
    }
}

/// The config a service's command line names (`… service run --config PATH`).
fn config_of(command_line: &str) -> Option<PathBuf> {
    let (_, rest) = command_line.split_once("--config")?;
    Some(PathBuf::from(rest.trim().trim_matches('"')))
}

/// The last reason a service's log gives for a start that failed.
fn last_failure(log: &Path) -> Option<String> {
    let text = std::fs::read_to_string(log).ok()?;
    let line = text.lines().rev().find(|l| l.contains(START_FAILED))?;
    Some(line[line.find(START_FAILED)? + START_FAILED.len()..].to_owned())
}
