// Helpers shared by the unit tests for checking the lockstep::Error a call throws, so that
// every test file words its error checks the same way instead of keeping its own copy.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "lockstep.h"

namespace lockstep::test {

/// Runs `fn`, expecting a lockstep::Error whose message contains `words`; reports a gtest
/// failure if `fn` throws none or the message lacks them.
template <class Fn>
void expect_error(Fn fn, const std::string& words) {
  try {
    fn();
    ADD_FAILURE() << "expected an error containing '" << words << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << "message was: " << e.what();
  }
}

/// Runs `fn`, expecting a lockstep::Error of `kind` whose message contains `words`.
template <class Fn>
void expect_error(Fn fn, ErrorKind kind, const std::string& words) {
  try {
    fn();
    ADD_FAILURE() << "expected an error containing '" << words << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << "message was: " << e.what();
    EXPECT_EQ(e.kind(), kind) << "message was: " << e.what();
  }
}

/// The message of the lockstep::Error that `fn` throws, or "no error" if it throws none, for
/// tests that compare whole messages.
template <class Fn>
std::string error_message(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace lockstep::test
