/* UROCE_FAULTS' grammar (faults.h): what it accepts, what it refuses with
 * a reason, and draws that follow the seed. */
#include <string.h>

#include "../check.h"
#include "faults.h"

static void test_accepts(void)
{
	struct uro_fault_spec f;
	char err[160];

	CHECK_EQ(uro_faults_parse("loss=2%,dup=0.5%,reorder=5%,corrupt=0.1%,rnr=10%,seed=7", &f,
				  err, sizeof(err)),
		 0);
	CHECK_EQ(f.loss, 20000);
	CHECK_EQ(f.dup, 5000);
	CHECK_EQ(f.reorder, 50000);
	CHECK_EQ(f.corrupt, 1000);
	CHECK_EQ(f.rnr, 100000);
	CHECK(f.seed == 7);
	CHECK_EQ(uro_faults_parse("delay=1ms~200us", &f, err, sizeof(err)), 0);
	CHECK(f.delay_ns == 1000000 && f.jitter_ns == 200000);
	CHECK_EQ(uro_faults_parse("delay=50us\xc2\xb1"
				  "20us",
				  &f, err, sizeof(err)),
		 0);
	CHECK(f.delay_ns == 50000 && f.jitter_ns == 20000);
	CHECK_EQ(uro_faults_parse("delay=2s", &f, err, sizeof(err)), 0);
	CHECK(f.delay_ns == 2000000000ull && f.jitter_ns == 0 && f.seed == 1);
	CHECK_EQ(uro_faults_parse("", &f, err, sizeof(err)), 0);
	CHECK_EQ(f.loss, 0);
	CHECK_EQ(f.stall_ns, 0);
	CHECK_EQ(uro_faults_parse("stall=200ms/2s", &f, err, sizeof(err)), 0);
	CHECK(f.stall_ns == 200000000ull && f.stall_period_ns == 2000000000ull);
}

/* type, qpn and dev narrow the faults; without them every packet takes
 * them. Opcodes: RC SEND Only 0x04, UC 0x24, UD 0x64 (IBTA 9.2). */
static void test_scope(void)
{
	struct uro_fault_spec f;
	char err[160];

	CHECK_EQ(uro_faults_parse("loss=1%", &f, err, sizeof(err)), 0);
	CHECK(uro_faults_scoped(&f, 0x04, 7) && uro_faults_scoped(&f, 0x64, 0));
	CHECK_EQ(f.dev[0], 0);
	CHECK_EQ(uro_faults_parse("loss=1%,type=rc|ud,qpn=0x1000,dev=uroce1", &f, err, sizeof(err)),
		 0);
	CHECK(uro_faults_scoped(&f, 0x04, 0x1000));
	CHECK(uro_faults_scoped(&f, 0x64, 0x1000));
	CHECK(!uro_faults_scoped(&f, 0x24, 0x1000)); /* UC */
	CHECK(!uro_faults_scoped(&f, 0x04, 0x1001));
	CHECK_STR(f.dev, "uroce1");
	CHECK_EQ(uro_faults_parse("type=uc", &f, err, sizeof(err)), 0);
	CHECK(uro_faults_scoped(&f, 0x24, 1) && !uro_faults_scoped(&f, 0x04, 1));
}

/* Silent for the last T of every period P, counted from the first packet. */
static void test_stall(void)
{
	struct uro_fault_spec f;
	char err[160];

	CHECK_EQ(uro_faults_parse("stall=200ms/2s", &f, err, sizeof(err)), 0);
	CHECK_EQ(uro_faults_stalled(&f, 0), 0);
	CHECK_EQ(uro_faults_stalled(&f, 1799999999ull), 0);
	CHECK_EQ(uro_faults_stalled(&f, 1800000000ull), 1);
	CHECK_EQ(uro_faults_stalled(&f, 1999999999ull), 1);
	CHECK_EQ(uro_faults_stalled(&f, 2000000000ull), 0);
	CHECK_EQ(uro_faults_stalled(&f, 3900000000ull), 1);
	CHECK_EQ(uro_faults_parse("loss=1%", &f, err, sizeof(err)), 0);
	CHECK_EQ(uro_faults_stalled(&f, 1999999999ull), 0);
}

static void test_refuses(void)
{
	static const char *const bad[] = {
	    "loss",	    "loss=2",	     "loss=101%",     "loss=-1%",    "loss=x%",
	    "drop=1%",	    "delay=5",	     "delay=1ms~2ms", "delay=11s",   "delay=1ms~",
	    "seed=abc",	    "loss=1%,dup",   "stall=200ms",   "stall=2s/2s", "stall=3s/2s",
	    "stall=0ms/2s", "stall=1ms/",    "stall=x/1s",    "type=",	     "type=rd",
	    "type=rc|",	    "qpn=0x1000000", "qpn=x",	      "dev=",
	};
	struct uro_fault_spec f;
	char err[160];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		CHECK_EQ(uro_faults_parse(bad[i], &f, err, sizeof(err)), -1);
		CHECK(strlen(err) > 0);
	}
	uro_faults_parse("drop=1%", &f, err, sizeof(err));
	CHECK(strstr(err, "unknown fault") != NULL);
}

static void test_draws(void)
{
	uint64_t a = 7, b = 7;
	unsigned hits = 0;

	for (int i = 0; i < 100000; i++) {
		int h = uro_faults_hit(&a, 100000);

		CHECK_EQ(h, uro_faults_hit(&b, 100000)); /* the same seed, the same faults */
		hits += (unsigned)h;
	}
	CHECK(hits > 9000 && hits < 11000); /* 10 % */
	CHECK_EQ(uro_faults_hit(&a, 0), 0);
	CHECK_EQ(uro_faults_hit(&a, 1000000), 1);
}

int main(void)
{
	test_accepts();
	test_refuses();
	test_draws();
	test_stall();
	test_scope();
	return check_report();
}
