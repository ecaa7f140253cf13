//! `gpu-operator-cuda-workload`, installed in our image also as `vectorAdd` (the command NVIDIA's
//! validator image answers to): runs the vector-add kernel on every visible GPU and exits 0 when
//! every result is right, or with the failure's own code and message.

use std::{io, process::ExitCode};

use gpu_operator_cuda_workload::{
    EXIT_CUDA_ERROR, EXIT_DRIVER_TOO_OLD, EXIT_NO_DEVICE, EXIT_NO_LIBRARY, EXIT_USAGE,
    EXIT_WRONG_RESULT, run,
};

fn usage() -> String {
    format!(
        "usage: vectorAdd\n\n\
         Adds two vectors on every GPU the driver (libcuda.so.1) shows this container and checks\n\
         the result. Exit codes: 0 passed, {EXIT_WRONG_RESULT} wrong result, {EXIT_NO_LIBRARY} no driver \
         library, {EXIT_NO_DEVICE} no GPU,\n{EXIT_CUDA_ERROR} a CUDA call failed, {EXIT_DRIVER_TOO_OLD} the driver \
         lacks an entry point, {EXIT_USAGE} usage."
    )
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        None => {}
        Some("-h" | "--help") => {
            println!("{}", usage());
            return ExitCode::SUCCESS;
        }
        Some(other) => {
            eprintln!("unexpected argument `{other}`\n\n{}", usage());
            return ExitCode::from(EXIT_USAGE);
        }
    }
    match run(&mut io::stdout().lock()) {
        Ok(_) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("Test FAILED: {failure}");
            ExitCode::from(failure.exit_code())
        }
    }
}
