//! Tokens of a `.phase` file, each with its byte span.
//!
//! Newlines are significant (they end statements, like `;`), except where a statement obviously
//! continues: inside `(...)` or `[...]`, after a binary operator, `=`, `..`, `.`, `,` or `{`.
//! Runs of newlines collapse into one token, so blank lines never matter. A block comment that
//! spans lines counts as a newline, a single-line one as a space.

use super::ast::Span;
use super::diag::Diagnostic;
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tok {
    /// Every word, keywords included: the parser decides what a word means where it stands.
    Ident(String),
    Int(i64),
    LParen,
    RParen,
    LBracket,
    RBracket,
    LBrace,
    RBrace,
    Comma,
    Semi,
    Newline,
    Dot,
    DotDot,
    Assign,
    Plus,
    Minus,
    Star,
    Slash,
    Percent,
    EqEq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    AndAnd,
    OrOr,
    Bang,
    Eof,
}

impl Tok {
    /// How the token reads in a diagnostic.
    pub fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("`{s}`"),
            Tok::Int(v) => format!("`{v}`"),
            Tok::Newline => "end of line".to_string(),
            Tok::Eof => "end of file".to_string(),
            other => format!("`{}`", other.text()),
        }
    }

    /// The text of a punctuation token.
    pub fn text(&self) -> &'static str {
        match self {
            Tok::LParen => "(",
            Tok::RParen => ")",
            Tok::LBracket => "[",
            Tok::RBracket => "]",
            Tok::LBrace => "{",
            Tok::RBrace => "}",
            Tok::Comma => ",",
            Tok::Semi => ";",
            Tok::Newline => "\n",
            Tok::Dot => ".",
            Tok::DotDot => "..",
            Tok::Assign => "=",
            Tok::Plus => "+",
            Tok::Minus => "-",
            Tok::Star => "*",
            Tok::Slash => "/",
            Tok::Percent => "%",
            Tok::EqEq => "==",
            Tok::Ne => "!=",
            Tok::Lt => "<",
            Tok::Le => "<=",
            Tok::Gt => ">",
            Tok::Ge => ">=",
            Tok::AndAnd => "&&",
            Tok::OrOr => "||",
            Tok::Bang => "!",
            Tok::Ident(_) | Tok::Int(_) | Tok::Eof => "",
        }
    }

    /// A token after which a line break does not end the statement.
    fn continues_line(&self) -> bool {
        matches!(
            self,
            Tok::Comma
                | Tok::LBrace
                | Tok::Dot
                | Tok::DotDot
                | Tok::Assign
                | Tok::Plus
                | Tok::Minus
                | Tok::Star
                | Tok::Slash
                | Tok::Percent
                | Tok::EqEq
                | Tok::Ne
                | Tok::Lt
                | Tok::Le
                | Tok::Gt
                | Tok::Ge
                | Tok::AndAnd
                | Tok::OrOr
                | Tok::Bang
                | Tok::Semi
                | Tok::Newline
        )
    }
}

impl fmt::Display for Tok {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    pub tok: Tok,
    pub span: Span,
}

/// Splits `source` into tokens; the last one is always `Eof`. Fails on the first bad character,
/// bad integer literal or unterminated block comment.
pub fn lex(source: &str) -> Result<Vec<Token>, Diagnostic> {
    Lexer {
        src: source,
        bytes: source.as_bytes(),
        // A UTF-8 byte order mark (editors on Windows write one) is not part of the text.
        pos: if source.starts_with('\u{feff}') { 3 } else { 0 },
        depth: 0,
        out: Vec::new(),
    }
    .run()
}

struct Lexer<'a> {
    src: &'a str,
    bytes: &'a [u8],
    pos: usize,
    /// Nesting of `(` and `[`: line breaks inside them are not statement ends.
    depth: usize,
    out: Vec<Token>,
}

impl<'a> Lexer<'a> {
    fn peek(&self, ahead: usize) -> u8 {
        self.bytes.get(self.pos + ahead).copied().unwrap_or(0)
    }

    fn push(&mut self, tok: Tok, start: usize) {
        self.out.push(Token {
            tok,
            span: Span::new(start, self.pos),
        });
    }

    fn newline(&mut self, start: usize, end: usize) {
        if self.depth > 0 {
            return;
        }
        match self.out.last() {
            None => {}
            Some(t) if t.tok.continues_line() => {}
            Some(_) => self.out.push(Token {
                tok: Tok::Newline,
                span: Span::new(start, end),
            }),
        }
    }

    fn run(mut self) -> Result<Vec<Token>, Diagnostic> {
        while self.pos < self.bytes.len() {
            let start = self.pos;
            let c = self.bytes[self.pos];
            match c {
                b'\n' => {
                    self.pos += 1;
                    self.newline(start, self.pos);
                }
                b' ' | b'\t' | b'\r' => self.pos += 1,
                b'/' if self.peek(1) == b'/' => {
                    while self.pos < self.bytes.len() && self.bytes[self.pos] != b'\n' {
                        self.pos += 1;
                    }
                }
                b'/' if self.peek(1) == b'*' => match self.src[start + 2..].find("*/") {
                    Some(rel) => {
                        self.pos = start + 2 + rel + 2;
                        if self.src[start..self.pos].contains('\n') {
                            self.newline(start, self.pos);
                        }
                    }
                    None => {
                        return Err(Diagnostic::new(
                            "E002",
                            Span::new(start, start + 2),
                            "this block comment is never closed; end it with `*/`",
                        ))
                    }
                },
                b'0'..=b'9' => self.number()?,
                b'A'..=b'Z' | b'a'..=b'z' | b'_' => {
                    while matches!(self.peek(0), b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_') {
                        self.pos += 1;
                    }
                    let word = self.src[start..self.pos].to_string();
                    self.push(Tok::Ident(word), start);
                }
                _ => {
                    let two = [c, self.peek(1)];
                    let (tok, len) = match &two {
                        b".." => (Tok::DotDot, 2),
                        b"==" => (Tok::EqEq, 2),
                        b"!=" => (Tok::Ne, 2),
                        b"<=" => (Tok::Le, 2),
                        b">=" => (Tok::Ge, 2),
                        b"&&" => (Tok::AndAnd, 2),
                        b"||" => (Tok::OrOr, 2),
                        _ => match c {
                            b'(' => (Tok::LParen, 1),
                            b')' => (Tok::RParen, 1),
                            b'[' => (Tok::LBracket, 1),
                            b']' => (Tok::RBracket, 1),
                            b'{' => (Tok::LBrace, 1),
                            b'}' => (Tok::RBrace, 1),
                            b',' => (Tok::Comma, 1),
                            b';' => (Tok::Semi, 1),
                            b'.' => (Tok::Dot, 1),
                            b'=' => (Tok::Assign, 1),
                            b'+' => (Tok::Plus, 1),
                            b'-' => (Tok::Minus, 1),
                            b'*' => (Tok::Star, 1),
                            b'/' => (Tok::Slash, 1),
                            b'%' => (Tok::Percent, 1),
                            b'<' => (Tok::Lt, 1),
                            b'>' => (Tok::Gt, 1),
                            b'!' => (Tok::Bang, 1),
                            _ => return Err(self.bad_char(start)),
                        },
                    };
                    match tok {
                        Tok::LParen | Tok::LBracket => self.depth += 1,
                        Tok::RParen | Tok::RBracket => self.depth = self.depth.saturating_sub(1),
                        _ => {}
                    }
                    self.pos += len;
                    self.push(tok, start);
                }
            }
        }
        let end = self.bytes.len();
        self.out.push(Token {
            tok: Tok::Eof,
            span: Span::new(end, end),
        });
        Ok(self.out)
    }

    fn bad_char(&self, start: usize) -> Diagnostic {
        let ch = self.src[start..].chars().next().unwrap_or('?');
        let end = start + ch.len_utf8();
        let hint = match ch {
            '&' => "; logical and is `&&`",
            '|' => "; logical or is `||`",
            '#' => "; comments start with `//`",
            '"' | '\'' => "; the language has no strings, only integers and names",
            _ => "; names are ASCII letters, digits and `_`",
        };
        Diagnostic::new(
            "E001",
            Span::new(start, end),
            format!("the character `{}` cannot appear here{hint}", ch.escape_debug()),
        )
    }

    /// Decimal `1_000` or hex `0xff_ff`; a letter or digit run glued to it makes it invalid.
    fn number(&mut self) -> Result<(), Diagnostic> {
        let start = self.pos;
        let hex = self.peek(0) == b'0' && matches!(self.peek(1), b'x' | b'X');
        if hex {
            self.pos += 2;
        }
        let digits_start = self.pos;
        while self.peek(0).is_ascii_alphanumeric() || self.peek(0) == b'_' {
            self.pos += 1;
        }
        let span = Span::new(start, self.pos);
        let text = &self.src[start..self.pos];
        let digits: String = self.src[digits_start..self.pos].chars().filter(|c| *c != '_').collect();
        let radix = if hex { 16 } else { 10 };
        let valid = !digits.is_empty() && digits.chars().all(|c| c.is_digit(radix));
        if !valid {
            let msg = if hex {
                format!("`{text}` is not a valid integer; a hex literal is `0x` followed by the digits 0-9 and a-f, like `0x1f`")
            } else {
                format!(
                    "`{text}` is not a valid integer; write decimal digits (optionally `_`-separated, like `1_024`) or hex like `0x400`"
                )
            };
            return Err(Diagnostic::new("E003", span, msg));
        }
        match i64::from_str_radix(&digits, radix) {
            Ok(v) => {
                self.push(Tok::Int(v), start);
                Ok(())
            }
            Err(_) => Err(Diagnostic::new(
                "E003",
                span,
                format!("`{text}` is too large; integers must be at most {}", i64::MAX),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok> {
        lex(s).unwrap().into_iter().map(|t| t.tok).collect()
    }

    fn id(s: &str) -> Tok {
        Tok::Ident(s.to_string())
    }

    #[test]
    fn integers_in_all_forms() {
        assert_eq!(
            toks("12 1_000 0x1f 0XFF_FF"),
            vec![Tok::Int(12), Tok::Int(1000), Tok::Int(31), Tok::Int(0xffff), Tok::Eof]
        );
    }

    #[test]
    fn bad_integers_are_rejected() {
        for s in ["0xZZ", "0x", "12ab", "99999999999999999999", "0x_"] {
            let e = lex(s).unwrap_err();
            assert_eq!(e.code, "E003", "{s}");
            assert_eq!(e.span.start, 0);
        }
    }

    #[test]
    fn newlines_are_suppressed_where_the_statement_continues() {
        assert_eq!(
            toks("a +\n b\n\n\nc"),
            vec![id("a"), Tok::Plus, id("b"), Tok::Newline, id("c"), Tok::Eof]
        );
        assert_eq!(
            toks("f(a,\n b\n)\n"),
            vec![
                id("f"),
                Tok::LParen,
                id("a"),
                Tok::Comma,
                id("b"),
                Tok::RParen,
                Tok::Newline,
                Tok::Eof
            ]
        );
        assert_eq!(toks("{\n x\n}"), vec![Tok::LBrace, id("x"), Tok::Newline, Tok::RBrace, Tok::Eof]);
        assert_eq!(toks("\n\n x"), vec![id("x"), Tok::Eof]);
    }

    #[test]
    fn comments_are_skipped() {
        assert_eq!(
            toks("a // hi\nb /* x */ c /* \n */ d"),
            vec![id("a"), Tok::Newline, id("b"), id("c"), Tok::Newline, id("d"), Tok::Eof]
        );
    }

    #[test]
    fn unterminated_comment_and_bad_character() {
        let e = lex("a /* never").unwrap_err();
        assert_eq!((e.code, e.span.start), ("E002", 2));
        let e = lex("a & b").unwrap_err();
        assert_eq!((e.code, e.span.start), ("E001", 2));
        let e = lex("é").unwrap_err();
        assert_eq!((e.code, e.span), ("E001", Span::new(0, 2)));
    }

    #[test]
    fn operators_longest_match() {
        assert_eq!(
            toks("0..n <= != ! = == && ||"),
            vec![
                Tok::Int(0),
                Tok::DotDot,
                id("n"),
                Tok::Le,
                Tok::Ne,
                Tok::Bang,
                Tok::Assign,
                Tok::EqEq,
                Tok::AndAnd,
                Tok::OrOr,
                Tok::Eof
            ]
        );
    }
}
