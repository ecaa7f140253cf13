//! The command names a `sh -c` script runs: enough of POSIX shell grammar for the scripts the
//! operator renders (lists, pipelines, loops, `[ … ]`, redirections, quoted words, `trap` actions).

/// Reserved words, which are grammar, not commands.
const RESERVED: &[&str] = &[
    "!", "{", "}", "if", "then", "else", "elif", "fi", "for", "in", "while", "until", "do", "done",
    "case", "esac",
];

/// Splits `script` into words and separators, keeping quoted text inside its word (quotes
/// removed). Separators (`;`, `&`, `|`, `&&`, `||`, newline) come back as `;`.
fn tokens(script: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut chars = script.chars().peekable();
    let flush = |word: &mut String, out: &mut Vec<String>| {
        if !word.is_empty() {
            out.push(std::mem::take(word));
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                for q in chars.by_ref() {
                    if q == c {
                        break;
                    }
                    word.push(q);
                }
                // An empty quoted word is still a word.
                if word.is_empty() {
                    word.push('\u{0}');
                }
            }
            ';' | '&' | '|' | '\n' => {
                flush(&mut word, &mut out);
                if out.last().is_none_or(|l| l != ";") {
                    out.push(";".to_owned());
                }
            }
            c if c.is_whitespace() => flush(&mut word, &mut out),
            c => word.push(c),
        }
    }
    flush(&mut word, &mut out);
    out
}

/// The command names `script` runs, in order (duplicates kept). The action of a `trap` is a
/// script of its own and is walked too.
pub fn command_words(script: &str) -> Vec<String> {
    let mut out = Vec::new();
    for command in tokens(script).split(|t| t == ";") {
        let mut words = command
            .iter()
            .skip_while(|w| RESERVED.contains(&w.as_str()))
            .filter(|w| !is_redirection(w));
        // `$!`-style words and assignments before the command are not commands.
        let Some(first) = words.by_ref().find(|w| !is_assignment(w)) else {
            continue;
        };
        if first == "trap"
            && let Some(action) = words.next()
        {
            out.push(first.clone());
            out.extend(command_words(action));
            continue;
        }
        out.push(first.clone());
    }
    out
}

fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

fn is_redirection(word: &str) -> bool {
    word.trim_start_matches(|c: char| c.is_ascii_digit())
        .starts_with(['>', '<'])
}

#[test]
fn command_words_of_the_rendered_scripts() {
    assert_eq!(
        command_words("until [ -f /a/b ]; do echo waiting for it; sleep 5; done; echo found"),
        ["[", "echo", "sleep", "echo"]
    );
    assert_eq!(
        command_words(
            "echo ok; trap 'kill $! 2>/dev/null; exit 0' TERM INT; while true; do sleep 3600 & wait $!; done"
        ),
        ["echo", "trap", "kill", "exit", "true", "sleep", "wait"]
    );
    assert_eq!(command_words("rm -f /x/*-ready"), ["rm"]);
    assert_eq!(
        command_words("A=1 nvidia-validator && cat x | grep y"),
        ["nvidia-validator", "cat", "grep"]
    );
}
