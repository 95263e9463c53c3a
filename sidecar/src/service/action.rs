//! What `sidecar service …` was asked: the action and its config path, read from the
//! arguments after `service`.

/// The service's name in the service manager.
pub const SERVICE_NAME: &str = "sqltunnel-sidecar";

/// What `sidecar service …` was asked.
#[derive(Debug, PartialEq, Eq)]
pub enum Action {
    /// Register the service, started at boot, with this config.
    Install(std::path::PathBuf),
    /// Stop it if it runs, and remove it.
    Uninstall,
    /// Start it.
    Start,
    /// Stop it.
    Stop,
    /// Serve as the service (the service manager's command line).
    Run(std::path::PathBuf),
}

/// Reads `install --config PATH`, `uninstall`, `start`, `stop` or `run --config PATH`.
pub fn parse(args: &[String]) -> Result<Action, String> {
    let config = || match args.get(1..) {
        Some([flag, path]) if flag == "--config" => Ok(std::path::PathBuf::from(path)),
        _ => Err(format!("sidecar service {}: give --config PATH", args[0])),
    };
    match args.first().map(String::as_str) {
        Some("install") => config().map(Action::Install),
        Some("run") => config().map(Action::Run),
        Some("uninstall") if args.len() == 1 => Ok(Action::Uninstall),
        Some("start") if args.len() == 1 => Ok(Action::Start),
        Some("stop") if args.len() == 1 => Ok(Action::Stop),
        _ => Err("usage: sidecar service install --config PATH | uninstall | start | stop".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn reads_each_action_and_refuses_the_rest() {
        let path = std::path::PathBuf::from("C:\\cfg\\sidecar.yaml");
        assert_eq!(
            parse(&args("install --config C:\\cfg\\sidecar.yaml")),
            Ok(Action::Install(path.clone()))
        );
        assert_eq!(parse(&args("run --config C:\\cfg\\sidecar.yaml")), Ok(Action::Run(path)));
        assert_eq!(parse(&args("stop")), Ok(Action::Stop));
        assert!(parse(&args("install")).is_err_and(|e| e.contains("--config")));
        assert!(parse(&args("start now")).is_err());
        assert!(parse(&args("")).is_err());
    }
}
