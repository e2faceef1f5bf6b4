//! Words a config, a fabric file or a flag chooses from: a group mode, a watchdog action, an
//! ECN option, a fabric's workload. Each set is one list (`keywords!`), from which follow the enum,
//! `ALL`, each word's name, the parser with its error text listing the choices, `Display`, and
//! clap's `ValueEnum` for flags, in the spirit of VPP's `foreach_*` lists.
//!
//! Invariant: a word is written once, in its set's list; nothing else spells out a set's words
//! (the config, the CLI, the error texts and the tests all take them from `ALL`).

/// Defines a keyword enum from one list: `Variant => "word",` per word, in the order errors
/// and `--help` list them.
macro_rules! keywords {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $($(#[doc = $doc:literal])* $variant:ident => $word:literal,)+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[doc = $doc])* $variant,)+
        }

        impl $name {
            /// Every word of the set, in its list's order.
            pub const ALL: &'static [Self] = &[$(Self::$variant),+];

            /// The word that names it in configs, flags, stats and logs.
            pub fn name(self) -> &'static str {
                match self {
                    $(Self::$variant => $word,)+
                }
            }

            /// The value a word names; the error says which words there are.
            pub fn parse(word: &str) -> Result<Self, String> {
                Self::ALL.iter().copied().find(|value| value.name() == word).ok_or_else(|| {
                    format!("'{word}' is not {}", $crate::keyword::choices(Self::ALL.iter().map(|value| value.name())))
                })
            }
        }

        impl $crate::keyword::Keyword for $name {
            fn from_word(word: &str) -> Result<Self, String> {
                Self::parse(word)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl clap::ValueEnum for $name {
            fn value_variants<'a>() -> &'a [Self] {
                Self::ALL
            }

            fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
                Some(clap::builder::PossibleValue::new(self.name()))
            }
        }
    };
}

pub(crate) use keywords;

/// What code generic over a set needs of it (the config's parser of optional words).
pub trait Keyword: Sized + Copy {
    /// `parse`: the value a word names, or the error listing the choices.
    fn from_word(word: &str) -> Result<Self, String>;
}

/// The words as a sentence lists them: "a", "a or b", "a, b or c".
pub fn choices<'a>(words: impl Iterator<Item = &'a str>) -> String {
    let words: Vec<&str> = words.collect();
    match words.split_last() {
        None => String::new(),
        Some((last, [])) => (*last).to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    keywords! {
        /// A set for the tests.
        pub enum Colour {
            /// The first.
            Red => "red",
            Green => "green",
            Light => "light-blue",
        }
    }

    #[test]
    fn every_word_parses_to_its_value_and_others_name_the_choices() {
        for colour in Colour::ALL {
            assert_eq!(Colour::parse(colour.name()), Ok(*colour));
            assert_eq!(colour.to_string(), colour.name());
        }
        assert_eq!(Colour::ALL, [Colour::Red, Colour::Green, Colour::Light]);
        assert_eq!(Colour::Light.name(), "light-blue");
        assert_eq!(Colour::parse("blue"), Err("'blue' is not red, green or light-blue".to_string()));
        assert_eq!(Colour::parse("Red"), Err("'Red' is not red, green or light-blue".to_string()));
    }

    #[test]
    fn clap_offers_the_same_words() {
        use clap::ValueEnum;
        let words: Vec<String> =
            Colour::value_variants().iter().map(|c| c.to_possible_value().unwrap().get_name().to_string()).collect();
        assert_eq!(words, ["red", "green", "light-blue"]);
        assert_eq!(Colour::from_str("green", false), Ok(Colour::Green));
    }

    #[test]
    fn choices_read_as_a_sentence() {
        assert_eq!(choices([].into_iter()), "");
        assert_eq!(choices(["a"].into_iter()), "a");
        assert_eq!(choices(["a", "b"].into_iter()), "a or b");
        assert_eq!(choices(["a", "b", "c"].into_iter()), "a, b or c");
    }
}
