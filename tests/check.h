/* Tiny assertion helpers for the data tests: report file:line and carry on
 * counting, so one run shows every failure. */
#ifndef DLJOB_TESTS_DATA_CHECK_H
#define DLJOB_TESTS_DATA_CHECK_H
#include <stdio.h>
#include <string.h>

static int check_failures;

#define CHECK(cond, ...) do { \
	if (!(cond)) { \
		fprintf(stderr, "%s:%d: FAIL: %s: ", __FILE__, __LINE__, #cond); \
		fprintf(stderr, __VA_ARGS__); \
		fputc('\n', stderr); \
		check_failures++; \
	} \
} while (0)

#define CHECK_CONTAINS(s, sub) CHECK(strstr((s), (sub)) != NULL, "message \"%s\" lacks \"%s\"", (s), (sub))

#endif
