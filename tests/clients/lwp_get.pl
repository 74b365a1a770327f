#!/usr/bin/perl
# lwp_get.pl URL N - Perl LWP::UserAgent (Debian libwww-perl) without
# keep_alive, as scripts use it: it sends "Connection: TE, close" and a new
# connection per request.  Prints per request the status, the Connection
# header as LWP gives it (in brackets, so padding shows), whether it
# equals "close", and the body length.
use strict;
use warnings;
use LWP::UserAgent;

my ($url, $n) = @ARGV;
my $ua = LWP::UserAgent->new(timeout => 10);
for my $i (1 .. $n) {
	my $r = $ua->get($url);
	my $c = $r->header("Connection") // "";
	printf "%d %s [%s] %s %d\n", $i, $r->code, $c,
		($c eq "close" ? "eq-close" : "ne-close"), length($r->content);
}
