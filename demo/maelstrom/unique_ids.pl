#!/usr/bin/perl
# Maelstrom's unique-ids workload in Perl (core modules only): a loop over stdin, a
# handler per message type. An id is the node's id and a per-node counter.
#
# --bug: the id is the counter alone: two nodes hand out 1.
use strict;
use warnings;
use JSON::PP;

my $bug = grep { $_ eq '--bug' } @ARGV;
my $json = JSON::PP->new->canonical;
my ($me, $count) = ('', 0);
$| = 1;

sub reply {
    my ($msg, $body) = @_;
    $body->{in_reply_to} = $msg->{body}{msg_id};
    print $json->encode({src => $me, dest => $msg->{src}, body => $body}), "\n";
}

my %handlers = (
    init => sub {
        my ($msg) = @_;
        $me = $msg->{body}{node_id};
        reply($msg, {type => 'init_ok'});
    },
    generate => sub {
        my ($msg) = @_;
        $count++;
        reply($msg, {type => 'generate_ok', id => $bug ? $count : "$me-$count"});
    },
);

while (my $line = <STDIN>) {
    next unless $line =~ /\S/;
    my $msg = $json->decode($line);
    my $handler = $handlers{$msg->{body}{type}};
    if ($handler) {
        $handler->($msg);
    } else {
        reply($msg, {type => 'error', code => 10, text => "no handler for $msg->{body}{type}"});
    }
}
