# Checks that the book holds together, before Doxygen is run:
#
#   cmake -DROOT=<repository root> -P check_book.cmake
#
# Reads docs/*.md and chapters/**/*.md (outside ``` fences and \code, \verbatim and \dot blocks,
# and outside `inline code`) and reports, as "file:line: ...", then fails:
#   - `\image html X` whose X is in no chapters/*/figures/ or docs/images/ folder;
#   - `\snippet FILE NAME` whose FILE is in neither src/ nor chapters/, or lacks the two
#     `//! [NAME]` markers (or `// [NAME]`) around the quoted block;
#   - a page without `[TOC]` (its table of contents) before its first `## ` section;
#   - a page other than the front page (docs/mainpage.md) without its navigation line both before
#     its first `## ` section and as its last non-empty line, in the form
#     **Previous:** @ref <page> "<title>" · **Next:** @ref <page> "<title>";
#   - a `\snippet` without its caption, `<div class="snippet-caption">` naming the quoted file
#     from the repository's root, on the line before it (blank lines between allowed);
#   - a chapter page (chapters/ch*/README.md) with more than WORD_BUDGET words of prose: words
#     outside blocks of code, output and diagrams, and outside \snippet and \image lines;
#   - a chapter page with what looks like a commit hash (7 to 12, or 40, hexadecimal digits with
#     both digits and letters) outside blocks of code and output: dated evidence belongs in the
#     chapter's measurements appendix;
#   - `@ref id` to a page or section id defined nowhere: ids that start with chapter, index or
#     conventions, or contain `_` (Doxygen's warnings catch references to the API). An id is
#     defined by `{#id}` in a page, or by \page, \section, \subsection or \anchor in a page or
#     a header under src/ or chapters/; `index` is Doxygen's name for the front page.

cmake_minimum_required(VERSION 3.16)  # if(IN_LIST) in script mode

if(NOT ROOT)
  message(FATAL_ERROR "check_book: pass -DROOT=<the repository root>")
endif()
get_filename_component(ROOT "${ROOT}" ABSOLUTE)

set(WORD_BUDGET 4500)
set(NAVIGATION_FORM "**Previous:** @ref <page> \"<title>\" · **Next:** @ref <page> \"<title>\"")
set(NAVIGATION_REGEX "^\\*\\*Previous:\\*\\* @ref [A-Za-z0-9_]+ \"[^\"]+\" · \\*\\*Next:\\*\\* @ref [A-Za-z0-9_]+ \"[^\"]+\"[ \t]*$")

# Characters that CMake's lists would take for separators or brackets, swapped for others
# while a file is split into lines.
string(ASCII 1 SEMICOLON)
string(ASCII 2 OPEN_BRACKET)
string(ASCII 3 CLOSE_BRACKET)

# read_lines(<path> <result>): the file's lines as a list, empty lines kept, with ; [ ] swapped
# (restore_line puts them back).
function(read_lines path result)
  file(READ "${path}" text)
  string(REPLACE "\r" "" text "${text}")
  string(REPLACE ";" "${SEMICOLON}" text "${text}")
  string(REPLACE "[" "${OPEN_BRACKET}" text "${text}")
  string(REPLACE "]" "${CLOSE_BRACKET}" text "${text}")
  string(REPLACE "\n" ";" text "${text}")
  set(${result} "${text}" PARENT_SCOPE)
endfunction()

macro(restore_line var)
  string(REPLACE "${SEMICOLON}" ";" ${var} "${${var}}")
  string(REPLACE "${OPEN_BRACKET}" "[" ${var} "${${var}}")
  string(REPLACE "${CLOSE_BRACKET}" "]" ${var} "${${var}}")
endmacro()

file(GLOB pages RELATIVE "${ROOT}" "${ROOT}/docs/*.md")
file(GLOB_RECURSE chapter_pages RELATIVE "${ROOT}" "${ROOT}/chapters/*.md")
list(APPEND pages ${chapter_pages})
list(SORT pages)

# The ids pages may refer to.
set(ids index)
file(GLOB_RECURSE headers "${ROOT}/src/*.h" "${ROOT}/chapters/*.h")
foreach(path ${headers} ${pages})
  if(NOT IS_ABSOLUTE "${path}")
    set(path "${ROOT}/${path}")
  endif()
  file(STRINGS "${path}" defining REGEX "\\{#[A-Za-z0-9_]+\\}|[@\\\\](page|section|subsection|subsubsection|anchor)[ \t]+[A-Za-z0-9_]+")
  foreach(line IN LISTS defining)
    string(REGEX MATCHALL "\\{#[A-Za-z0-9_]+\\}|[@\\\\](page|section|subsection|subsubsection|anchor)[ \t]+[A-Za-z0-9_]+" found "${line}")
    foreach(definition ${found})
      string(REGEX REPLACE "^\\{#|\\}$|^[@\\\\][a-z]+[ \t]+" "" id "${definition}")
      list(APPEND ids "${id}")
    endforeach()
  endforeach()
endforeach()

# The figures, by file name.
file(GLOB figure_paths "${ROOT}/chapters/*/figures/*" "${ROOT}/docs/images/*")
set(figures "")
foreach(path ${figure_paths})
  get_filename_component(name "${path}" NAME)
  list(APPEND figures "${name}")
endforeach()

set(faults "")
foreach(page ${pages})
  read_lines("${ROOT}/${page}" lines)
  set(line_number 0)
  set(in_block "")
  set(first_section 0)
  set(top_navigation 0)
  set(last_text_line 0)
  set(last_text "")
  set(toc_line 0)
  set(prose_words 0)
  set(previous_text "")
  foreach(line IN LISTS lines)
    math(EXPR line_number "${line_number} + 1")
    restore_line(line)
    if(line MATCHES "[^ \t]")
      set(last_text_line ${line_number})
      set(last_text "${line}")
    endif()
    # Code is quoted, not read: skip fenced blocks and Doxygen's verbatim blocks.
    if(in_block)
      if(line MATCHES "${in_block}")
        set(in_block "")
      endif()
      continue()
    endif()
    if(line MATCHES "^[ \t]*(```|~~~)")
      set(in_block "^[ \t]*${CMAKE_MATCH_1}")
      continue()
    endif()
    if(line MATCHES "^[ \t]*[@\\\\](code|verbatim|dot|msc|startuml)([^A-Za-z]|$)")
      set(in_block "[@\\\\]end${CMAKE_MATCH_1}")
      continue()
    endif()
    if(line MATCHES "^## " AND first_section EQUAL 0)
      set(first_section ${line_number})
    endif()
    if(line MATCHES "${NAVIGATION_REGEX}" AND first_section EQUAL 0)
      set(top_navigation ${line_number})
    endif()
    if(line MATCHES "^[ \t]*\\[TOC\\][ \t]*$" AND first_section EQUAL 0)
      set(toc_line ${line_number})
    endif()
    # Prose: every word outside the blocks skipped above, except the lines that quote code or
    # show a figure. (; would split the list of words.)
    if(NOT line MATCHES "^[ \t]*[@\\](snippet|image)[{ \t]")
      string(REPLACE ";" "," words "${line}")
      string(REGEX MATCHALL "[^ \t]+" words "${words}")
      list(LENGTH words word_count)
      math(EXPR prose_words "${prose_words} + ${word_count}")
    endif()
    if(page MATCHES "^chapters/ch[^/]*/README\\.md$"
       AND line MATCHES "(^|[^0-9A-Za-z])([0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]+)([^0-9A-Za-z]|$)")
      string(REGEX MATCHALL "[0-9a-f]+" hex_runs "${line}")
      foreach(run IN LISTS hex_runs)
        string(LENGTH "${run}" run_length)
        if(((run_length GREATER_EQUAL 7 AND run_length LESS_EQUAL 12) OR run_length EQUAL 40)
           AND run MATCHES "[0-9]" AND run MATCHES "[a-f]")
          # Only whole words: the run must not be part of a longer word.
          string(REGEX MATCH "(^|[^0-9A-Za-z])${run}([^0-9A-Za-z]|$)" whole "${line}")
          if(whole)
            list(APPEND faults "${page}:${line_number}: '${run}' looks like a commit hash in the chapter's main text: dated evidence belongs in its measurements appendix")
          endif()
        endif()
      endforeach()
    endif()
    string(REGEX REPLACE "`[^`]*`" "" text "${line}")

    if(text MATCHES "[@\\\\]image[ \t]+html[ \t]+\"?([^ \t\"]+)")
      set(figure "${CMAKE_MATCH_1}")
      get_filename_component(figure_name "${figure}" NAME)
      if(NOT figure_name IN_LIST figures)
        list(APPEND faults "${page}:${line_number}: figure '${figure}' is in no chapters/*/figures/ or docs/images/ folder")
      endif()
    endif()

    if(text MATCHES "[@\\\\]snippet({[^}]*})?[ \t]+([^ \t]+)[ \t]+(.*[^ \t])[ \t]*$")
      set(snippet_file "${CMAKE_MATCH_2}")
      set(snippet_name "${CMAKE_MATCH_3}")
      set(snippet_path "")
      foreach(folder src chapters tests)
        if(EXISTS "${ROOT}/${folder}/${snippet_file}" AND NOT IS_DIRECTORY "${ROOT}/${folder}/${snippet_file}")
          set(snippet_path "${ROOT}/${folder}/${snippet_file}")
          break()
        endif()
      endforeach()
      if(snippet_path)
        file(RELATIVE_PATH snippet_from_root "${ROOT}" "${snippet_path}")
        if(NOT previous_text MATCHES "<div class=\"snippet-caption\">" OR
           NOT previous_text MATCHES "${snippet_from_root}")
          list(APPEND faults "${page}:${line_number}: snippet '${snippet_name}' has no caption: put <div class=\"snippet-caption\">`${snippet_from_root}`</div> on the line before it")
        endif()
      endif()
      if(NOT snippet_path)
        list(APPEND faults "${page}:${line_number}: snippet file '${snippet_file}' is in none of src/, chapters/ and tests/")
      else()
        file(READ "${snippet_path}" source)
        # Markers are comments holding the name in brackets: //! [NAME] (// [NAME] in a header,
        # where //! would document the next declaration; # [NAME] in Python).
        string(REGEX MATCHALL "(//!?|#)[ \t]*\\[[^]\n]*\\]" markers "${source}")
        set(count 0)
        foreach(marker ${markers})
          string(REGEX REPLACE "^(//!?|#)[ \t]*" "" marker "${marker}")
          if(marker STREQUAL "[${snippet_name}]")
            math(EXPR count "${count} + 1")
          endif()
        endforeach()
        if(NOT count EQUAL 2)
          list(APPEND faults "${page}:${line_number}: snippet '${snippet_name}' needs two '//! [${snippet_name}]' markers in ${snippet_file}, found ${count}")
        endif()
      endif()
    endif()

    string(REGEX MATCHALL "[@\\\\]ref[ \t]+[A-Za-z0-9_:.]+" references "${text}")
    foreach(reference ${references})
      string(REGEX REPLACE "^[@\\\\]ref[ \t]+" "" id "${reference}")
      string(REGEX REPLACE "[.:]+$" "" id "${id}")
      if(id MATCHES "^[A-Za-z0-9_]+$" AND (id MATCHES "^(chapter|index|conventions)" OR id MATCHES "_")
         AND NOT id IN_LIST ids)
        list(APPEND faults "${page}:${line_number}: @ref ${id} names no page or section (no {#${id}} anywhere)")
      endif()
    endforeach()
    if(line MATCHES "[^ \t]")
      set(previous_text "${line}")
    endif()
  endforeach()

  if(toc_line EQUAL 0)
    if(first_section EQUAL 0)
      set(toc_at 1)
    else()
      set(toc_at ${first_section})
    endif()
    list(APPEND faults "${page}:${toc_at}: no table of contents: put a line [TOC] before the first section")
  endif()
  if(page MATCHES "^chapters/ch[^/]*/README\\.md$" AND prose_words GREATER WORD_BUDGET)
    list(APPEND faults "${page}:1: ${prose_words} words of prose, over a chapter's budget of ${WORD_BUDGET}: move evidence to the measurements appendix, or say it once")
  endif()

  if(NOT page STREQUAL "docs/mainpage.md")
    if(top_navigation EQUAL 0)
      if(first_section EQUAL 0)
        set(first_section 1)
      endif()
      list(APPEND faults "${page}:${first_section}: no navigation line before the first section, expected ${NAVIGATION_FORM}")
    endif()
    if(NOT last_text MATCHES "${NAVIGATION_REGEX}")
      list(APPEND faults "${page}:${last_text_line}: the last line is not the navigation line, expected ${NAVIGATION_FORM}")
    endif()
  endif()
endforeach()

list(LENGTH pages page_count)
if(faults)
  list(LENGTH faults count)
  # One plain line each (a fatal error's text is wrapped), then the verdict.
  foreach(fault IN LISTS faults)
    message("${fault}")
  endforeach()
  message(FATAL_ERROR "${count} fault(s) in the book's ${page_count} pages")
endif()
list(LENGTH figures figure_count)
message("${page_count} pages, ${figure_count} figures: every figure, snippet and its caption, reference, table of contents and navigation line found; every chapter within ${WORD_BUDGET} words of prose and free of commit hashes")
